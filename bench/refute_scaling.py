"""Refuter cost vs mesh size: the search on a reduced mesh against evaluation at the real mesh.

For Llama-3-8B under Megatron TP x DP x micro-batches (``examples/llama3_8b_megatron.py``
``build(dp, tp, microbatches, n_layers)``), prints per configuration: the elements the evaluator
computes (``proofs.reduction.eval_cost``) and the seconds of (a) the refuter's search on the
reduced mesh (``proofs.refute.refute_reduced_mesh``, what ``prove`` runs) and (b) a refutation
at the real mesh sizes (reduced dims only; what ``prove`` ran before, and still runs to confirm a
divergence), skipped above ``--max-elements``; then one asymmetric mutant (RMSNorm epsilon
different on the last dp rank) proved end to end at dp 64.

    python bench/refute_scaling.py [--n-layers 2] [--max-elements 1e9] [--json]

Timing is reported, never asserted (docs/rank-symmetry.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import sys
import time
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GRID = [(4, 8, 4), (64, 8, 16), (256, 8, 64), (1024, 8, 4), (4, 8, 1024), (1024, 8, 1024)]


def _example():
    spec = importlib.util.spec_from_file_location("_llama8b", ROOT / "examples" /
                                                  "llama3_8b_megatron.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def row(mod, dp: int, tp: int, k: int, n_layers: int, max_elements: float) -> dict:
    from proofs.reduction import eval_cost, reduce_binding
    from proofs.refute import refute, refute_reduced_mesh
    from spec_lang import build_problem

    p = build_problem(*mod.build(dp=dp, tp=tp, microbatches=k, n_layers=n_layers),
                      path="llama3_8b_megatron.py", sha256="0" * 64)
    roots = [t for g in p.goals for t in (g.expected, g.actual)]
    t0 = time.monotonic()
    r, mr = refute_reduced_mesh(p.goals, p.binding)
    search_s = time.monotonic() - t0
    real_b = reduce_binding(roots, p.binding)
    real_cost = eval_cost(roots, real_b)
    out = {"dp": dp, "tp": tp, "mb": k, "reduced_mesh": mr.mesh,
           "search_elements": eval_cost(mr.roots, mr.binding), "search_s": round(search_s, 2),
           "search_diverging": len(r.mismatched) if r else None,
           "real_elements": real_cost, "real_s": None}
    if real_cost <= max_elements:
        t0 = time.monotonic()
        refute(p.goals, real_b, p.mesh)
        out["real_s"] = round(time.monotonic() - t0, 2)
    return out


def mutant(mod, n_layers: int) -> dict:
    from proofs.prover import prove
    from spec_lang import build_problem, ops
    from spec_lang.models import LLAMA3_8B, llama

    dp, tp, k = 64, 8, 16
    spec, plan = mod.build(dp=dp, tp=tp, microbatches=k, n_layers=n_layers)
    model = llama(dataclasses.replace(LLAMA3_8B, n_layers=n_layers, batch=dp * k))
    eps = [Fraction(1, 10**5)] * (dp - 1) + [Fraction(1, 10**6)]
    bad = dataclasses.replace(model, config=dataclasses.replace(
        model.config, norm_eps=ops.rank_const("dp", eps)))
    from spec_lang.plans import colwise, megatron, replicated, rowwise

    d = bad.dims   # the example's layer plan
    lp = {"attention_norm": replicated(), "attn.wq": colwise(d.KVH), "attn.wk": colwise(d.KVH),
          "attn.wv": colwise(d.KVH), "attn.wo": rowwise(d.KVH), "ffn_norm": replicated(),
          "mlp.w1": colwise(d.F), "mlp.w3": colwise(d.F), "mlp.w2": rowwise(d.F)}
    p = build_problem(spec, megatron(bad, tp=tp, dp=dp, microbatches=k, layers=lp),
                      path="eps_mutant.py", sha256="0" * 64)
    t0 = time.monotonic()
    rep = prove(p, timeout_s=600)
    cx = rep.counterexample
    return {"mutant": "eps on dp rank 63 (dp64 tp8 mb16)", "verdict": rep.verdict,
            "seconds": round(time.monotonic() - t0, 2),
            "phases": {k2: round(v, 2) for k2, v in rep.seconds.items()},
            "note": next((n for n in (cx.notes if cx else []) if n.startswith("asymmetric")), "")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-layers", type=int, default=2)
    ap.add_argument("--max-elements", type=float, default=1e9)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    mod = _example()
    rows = [row(mod, dp, tp, k, a.n_layers, a.max_elements) for dp, tp, k in GRID]
    mut = mutant(mod, a.n_layers)
    if a.json:
        print(json.dumps({"rows": rows, "mutant": mut}, indent=1))
        return 0
    print(f"Llama-3-8B Megatron, {a.n_layers} layers: refuter search (reduced mesh) vs real mesh")
    print(f"{'dp':>5} {'tp':>3} {'mb':>5} | {'reduced mesh':<22} {'elements':>10} {'search s':>9}"
          f" | {'real elements':>13} {'real s':>8}")
    for r in rows:
        red = ",".join(f"{k}{v}" for k, v in r["reduced_mesh"].items())
        real_s = "skipped" if r["real_s"] is None else f"{r['real_s']:.2f}"
        print(f"{r['dp']:>5} {r['tp']:>3} {r['mb']:>5} | {red:<22} {r['search_elements']:>10.3g} "
              f"{r['search_s']:>9.2f} | {r['real_elements']:>13.3g} {real_s:>8}")
    print(f"\n{mut['mutant']}: {mut['verdict']} in {mut['seconds']} s {mut['phases']}")
    print(f"  {mut['note']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
