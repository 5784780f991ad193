"""Helpers of the adversarial round: genuine certificates of plan files, and forgeries of them.

A forgery only uses what a certificate forger has: the certificate's own node table, and the
checker's own public functions to regenerate what the checker will recompute (the admissible
binding of an smt step, the SMT-LIB2 text), so that the checker's decision rests on exactly the
check under test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from proofs.admissible import ASSUMPTION, analyse, proof_binding
from proofs.certificate import certificate_of, write_certificate
from proofs.kernel import NodeTable, from_terms, node_hash_table
from proofs.prover import prove
from proofs.smt import build_query
from spec_lang import load


def certificate(plan: Path, out: Path, timeout_s: float = 120) -> dict[str, Any]:
    """``prove`` the plan file (in this process: the plan is ours) and write its certificate."""
    report = prove(load(plan), timeout_s=timeout_s)
    cert = certificate_of(report)
    write_certificate(out, cert)
    return json.loads(out.read_text())


def certificates_in(d: Path, plans: dict[str, Path | str]) -> None:
    """Write each plan (``name.py -> source path, or its text``) into ``d`` and its genuine
    certificate ``d/<name>.json``, proved from inside ``d`` so that the certificate records the
    plan's path as ``<name>.py`` (relative, as a user gives it)."""
    import os
    import shutil

    for name, src in plans.items():
        if isinstance(src, Path):
            shutil.copy(src, d / name)
        else:
            (d / name).write_text(src)
    old = os.getcwd()
    os.chdir(d)
    try:
        for name in plans:
            certificate(Path(name), d / f"{Path(name).stem}.json")
    finally:
        os.chdir(old)


def children() -> set[int]:
    """Pids of this process's live (or not yet reaped) children, read from ``/proc``."""
    import os

    me, out = str(os.getpid()), set()
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if (p / "stat").read_text().rsplit(")", 1)[-1].split()[1] == me:
                    out.add(int(p.name))
            except (OSError, IndexError):
                pass
    return out


def part_hashes(plan: Path) -> list[str]:
    """Merkle hashes of the PART nodes of the plan's goals (the z3 encoding names their addends
    ``part:<hash[:16]>@<rank>[<index>]``)."""
    pb = load(plan)
    t = NodeTable()
    from_terms(t, [x for g in pb.goals for x in (g.expected, g.actual)])
    h = node_hash_table(t)
    return [h[i] for i, n in enumerate(t.nodes) if n[0] == "PART"]


def forge_smt(cert: dict[str, Any], names: set[str] | None = None) -> dict[str, Any]:
    """Every obligation not proved (or those in ``names``) proved by an ``smt`` step at the
    binding the checker recomputes, with the query text the checker regenerates; verdict
    EQUIVALENT."""
    cert = json.loads(json.dumps(cert))
    t = NodeTable.from_json(cert["nodes"])
    real = dict(cert["binding"])
    for o in cert["obligations"]:
        if (names is None and o["method"] in ("rewrite", "smt", "reused")) or \
                (names is not None and o["name"] not in names):
            continue
        e, a = o["expected"], o["actual"]
        b = proof_binding(analyse(t.nodes, [e, a], real), real)
        q = build_query(t, e, a, b)
        cert["steps"].append({"kind": "smt", "lhs": e, "rhs": a, "binding": b, "smt2": q.smt2,
                              "answer": "unsat", "solver": "z3"})
        o["method"], o["proof"] = "smt", len(cert["steps"]) - 1
        o.pop("reason", None)
        if b != real and ASSUMPTION not in cert["assumptions"]:
            cert["assumptions"].append(ASSUMPTION)
    cert["verdict"], cert["counterexample"] = "EQUIVALENT", None
    return cert


def write(path: Path, cert: dict[str, Any]) -> Path:
    write_certificate(path, cert)
    return path


def _permissive_replay(pairs, binding, seed, edge):
    """``proofs.replay.replay`` without its overflow rule (a forger computes values as it likes;
    the checker re-runs the real replay)."""
    import numpy as np

    from proofs.replay import aligned, apply_edge
    from spec_lang.evaluate import evaluate, sample_inputs
    from spec_lang.term import Binding

    b = Binding(dict(binding))
    rng = np.random.default_rng(seed)
    roots = [t for p in pairs for t in p]
    inputs = sample_inputs(roots, b, rng)
    apply_edge(inputs, edge, roots, b)
    vals = evaluate(roots, b, inputs, rng=rng, keep="roots")
    return [aligned(vals[e], vals[a]) for e, a in pairs]


def forge_refutation(cert: dict[str, Any], seed: int, edge: dict[str, Any] | None = None,
                     binding: dict[str, int] | None = None) -> dict[str, Any] | None:
    """A NOT EQUIVALENT certificate refuting every obligation the certificate does not prove
    that diverges on the replay ``(seed, edge, binding)`` (the replay the checker re-runs,
    ``proofs/replay.py``); None when none diverges."""
    import warnings

    import numpy as np

    from proofs.checker_refutation import _terms
    from proofs.replay import differs

    cert = json.loads(json.dumps(cert))
    t = NodeTable.from_json(cert["nodes"])
    b = dict(binding or cert["binding"])
    obs = cert["obligations"]
    terms = _terms(t, [x for o in obs for x in (o["expected"], o["actual"])])
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vals = _permissive_replay([(terms[o["expected"]], terms[o["actual"]]) for o in obs], b,
                                  seed, edge)
    bad = [(o, v) for o, v in zip(obs, vals)
           if o["method"] not in ("rewrite", "smt", "reused") and differs(v[1], v[2]).any()]
    if not bad:
        return None
    names = [o["name"] for o, _ in bad]
    axes, de, da = bad[0][1]
    first = [int(i) for i in np.argwhere(differs(de, da))[0]]
    for o in obs:
        if o["name"] in names:
            o["method"], o["reason"] = "refuted", "values differ"
            o.pop("proof", None)
            o.pop("reuses", None)
    rp: dict[str, Any] = {"goals": names, "seed": seed, "binding": b}
    if edge is not None:
        rp["edge"] = edge
    o0 = bad[0][0]
    cert["counterexample"] = {
        "also_diverging": names[1:], "explanation": "forged", "goal": names[0],
        "index": {x: first[k] for k, x in enumerate(axes) if not x.startswith("@")},
        "kind": o0["kind"], "placement": o0.get("placement", ""),
        "rank": {x[1:]: first[k] for k, x in enumerate(axes) if x.startswith("@")},
        "ratio": "1", "reduced_binding": b, "replay": rp, "seed": seed,
        "site": o0.get("site", ""), "tensor": names[0], "values": []}
    cert["verdict"] = "NOT EQUIVALENT"
    return cert
