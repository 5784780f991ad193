"""Benchmark: normalise and log a deep tensor-parallel MLP stack (forward and backward).

    python bench/normalise.py [--layers 128] [--tp 8] [--check]
    python bench/normalise.py --plan tests/spec_lang/plans/debug_tp_dp.py   # a real plan file

Each layer is ``x' = x + w2^T silu(w1^T x)`` with Megatron TP (column-parallel w1, row-parallel
w2, all-reduce after w2; backward all-reduce of dx after w1), built directly as terms for the
spec and the plan, with hand-written reverse mode (silu' = s (1 + a (1 - s))). Goals: the
output, every weight gradient (a shard of the spec gradient) and dx of the input. Prints the
node count, seconds (normalise, to_json), log steps, goals proved and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rewriting import Normaliser, normalise  # noqa: E402
from rewriting import build as b  # noqa: E402
from spec_lang.term import Binding, Op, walk  # noqa: E402


def mlp_stack(layers: int, tp: str | None):
    """Spec (tp=None) or plan terms: (output, [dw1, dw2 per layer], dx)."""
    def sh(w):
        return b.shard(w, "F", tp) if tp else w

    def reduce(y):
        return b.all_reduce(y, tp) if tp else y

    x = b.inp("x", ["B", "H"], "data")
    ws = [(b.inp(f"l{i}.w1", ["H", "F"]), b.inp(f"l{i}.w2", ["F", "H"])) for i in range(layers)]
    xs, acts = [x], []
    for w1, w2 in ws:
        a = b.einsum([xs[-1], sh(w1)], ["B", "F"])
        s = b.unary(Op.SILU, a)
        y = reduce(b.einsum([s, sh(w2)], ["B", "H"]))
        xs.append(b.add(xs[-1], y))
        acts.append((a, s))
    g = b.inp("dout", ["B", "H"], "data")  # cotangent of the output
    grads = []
    for (w1, w2), (a, s), xin in reversed(list(zip(ws, acts, xs))):
        ds = b.einsum([g, sh(w2)], ["B", "F"])
        sg = b.unary(Op.SIGMOID, a)
        da = b.mul(ds, sg, b.add(b.const(1), b.mul(a, b.add(b.const(1), b.neg(sg)))))
        grads.append(b.einsum([s, g], ["F", "H"]))   # dw2
        grads.append(b.einsum([xin, da], ["H", "F"]))  # dw1
        g = b.add(g, reduce(b.einsum([da, sh(w1)], ["B", "H"])))
    return xs[-1], grads, g


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=128)
    ap.add_argument("--tp", type=int, default=8)
    ap.add_argument("--check", action="store_true", help="run the producer's self-checks")
    ap.add_argument("--plan", help="normalise every goal of this plan file instead")
    args = ap.parse_args()
    if args.plan:
        from spec_lang import load

        problem = load(args.plan)
        bd = problem.binding
        goals = [(g.expected, g.actual) for g in problem.goals]
        args.layers, args.tp = "-", "-"
    else:
        bd = Binding({"B": 16 * args.tp, "H": 8 * args.tp, "F": 32 * args.tp, "tp": args.tp})
        spec_out, spec_grads, spec_dx = mlp_stack(args.layers, None)
        plan_out, plan_grads, plan_dx = mlp_stack(args.layers, "tp")
        goals = [(spec_out, plan_out), (spec_dx, plan_dx)]
        goals += [(b.shard(e, "F", "tp"), a) for e, a in zip(spec_grads, plan_grads)]
    roots = [t for pair in goals for t in pair]
    nodes = len(walk(roots))
    t0 = time.perf_counter()
    nfs, log = normalise(roots, bd, normaliser=Normaliser(bd, check=args.check))
    t1 = time.perf_counter()
    data = log.to_json(roots=roots)
    text = json.dumps(data)
    t2 = time.perf_counter()
    proved = sum(nfs[2 * i] is nfs[2 * i + 1] for i in range(len(goals)))
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"plan={args.plan or 'mlp-stack'} layers={args.layers} tp={args.tp} "
          f"input_nodes={nodes} goals={len(goals)} "
          f"proved={proved}")
    print(f"normalise_s={t1 - t0:.2f} to_json_s={t2 - t1:.2f} records={len(log.records)} "
          f"steps={log.steps} json_mb={len(text) / 1e6:.1f} peak_rss_mb={rss_mb:.0f}")
    print("top rules:", ", ".join(f"{k}={v}" for k, v in log.rule_counts.most_common(8)))


if __name__ == "__main__":
    main()
