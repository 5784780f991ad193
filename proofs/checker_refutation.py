"""The checker's NOT EQUIVALENT replay and the RNG obligation's assumption (``proofs/checker.py``
steps 6): a refuted obligation must diverge on the recorded draw at a binding
``docs/soundness.md`` section 3 allows; an EQUIVALENT certificate with dropout masks must record
the ``rng:`` assumption. Part of the checker's trusted base (``docs/trusted-base.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proofs.checker_load import _fail
from proofs.kernel import MESH_AXES, NodeTable


def _check_refutation(cert: Mapping[str, Any], table: NodeTable, chk: Any,
                      refuted: list[dict[str, Any]]) -> None:
    """Re-run the refuter's replay (``proofs/replay.py``): every refuted obligation, and only
    those, must diverge on the recorded draw, with the counterexample's goal first."""
    cx = cert["counterexample"]
    rp = cx.get("replay")
    if not isinstance(rp, dict):
        raise _fail("verdict NOT EQUIVALENT but the counterexample has no replay")
    goals, seed, b = rp.get("goals"), rp.get("seed"), rp.get("binding")
    names = {o["name"] for o in refuted}
    if not isinstance(goals, list) or not goals or goals[0] != cx.get("goal") \
            or len(set(goals)) != len(goals) or set(goals) != names:
        raise _fail(f"the replay's goals {str(goals)[:80]} are not the refuted goals "
                    f"{sorted(names)[:3]} with the counterexample's goal {cx.get('goal')!r} first")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise _fail(f"replay seed {seed!r} is not a non-negative integer")
    real = chk.binding
    if not isinstance(b, dict) or set(b) != set(real) or not all(
            not isinstance(v, bool) and isinstance(v, int) and 0 < v <= real[k]
            for k, v in b.items()):
        raise _fail("the replay binding does not give every dim and axis of the binding a size "
                    "between 1 and its real size")
    for ax in MESH_AXES:
        if ax in real and b[ax] != real[ax]:
            raise _fail(f"the replay binding gives mesh axis {ax} size {b[ax]}, the plan "
                        f"{real[ax]} (only dims may be reduced)")
    by_name = {o["name"]: o for o in refuted}
    # a divergence below the real sizes counts only where docs/soundness.md section 3 makes it
    # one at the real sizes: recomputed from the refuted obligations' terms
    from proofs.admissible import replay_error

    err = replay_error(table.nodes, [(o["name"], o["expected"], o["actual"]) for o in refuted],
                       real, b)
    if err is not None:
        raise _fail(f"the replay binding is not one at which a divergence is one at the real "
                    f"sizes: {err}")
    proved_pairs = {(st["lhs"], st["rhs"]) for st in chk.steps}
    for o in refuted:
        e, a = o["expected"], o["actual"]
        if "proof" in o or "reuses" in o or e == a or (e, a) in proved_pairs \
                or (a, e) in proved_pairs:
            raise _fail(f"goal {o['name']}: refuted, but the certificate proves "
                        f"expected == actual")
    import warnings

    import numpy as np

    from proofs.replay import REPLAY_ERRORS, differs, replay

    terms = _terms(table, [x for n in goals for x in (by_name[n]["expected"],
                                                     by_name[n]["actual"])])
    pairs = [(terms[by_name[n]["expected"]], terms[by_name[n]["actual"]]) for n in goals]
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            vals = replay(pairs, b, seed, rp.get("edge"))   # a domain-valid edge case or None
            diffs = [differs(de, da) for _, de, da in vals]
    except REPLAY_ERRORS as e:
        raise _fail(f"the replay cannot be evaluated: {_one_line(e)}") from None
    for n, d in zip(goals, diffs):
        if not d.any():
            raise _fail(f"goal {n}: refuted, but its two sides agree on the replay "
                        f"(seed {seed}): not a counterexample")
    axes = vals[0][0]
    first = [int(i) for i in np.argwhere(diffs[0])[0]]
    rank = {x[1:]: first[k] for k, x in enumerate(axes) if x.startswith("@")}
    index = {x: first[k] for k, x in enumerate(axes) if not x.startswith("@")}
    if (cx.get("rank"), cx.get("index", index)) != (rank, index):
        raise _fail(f"the counterexample's rank {cx.get('rank')} and index {cx.get('index')} "
                    f"are not the replay's first divergence (rank {rank}, index {index})")


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:200]


def _terms(table: NodeTable, roots: list[int]) -> dict[int, Any]:
    """``spec_lang`` terms of the nodes below ``roots`` (the DSL's term IR is trusted)."""
    from spec_lang.term import DimSpec, Op, term

    need: set[int] = set()
    stack = list(roots)
    while stack:
        i = stack.pop()
        if i not in need:
            need.add(i)
            stack.extend(table.nodes[i][1])
    out: dict[int, Any] = {}
    for i in sorted(need):  # children have smaller ids
        op, args, attrs, dims = table.nodes[i]
        out[i] = term(Op[op], tuple(out[a] for a in args), attrs,
                      tuple(DimSpec(n, tuple(s)) for n, s in dims))
    return out


RNG_ASSUMPTION = "rng: dropout draws are renamed to the spec's mask symbols"
PER_STAGE = "per-stage generators"


def _require_rng_assumption(cert: Mapping[str, Any], table: NodeTable) -> None:
    """An EQUIVALENT certificate whose terms hold dropout masks (``INPUT("dropout:...")``) rests
    on the RNG obligation (proofs/rng.py): its ``rng:`` assumption must be recorded, and with
    binding ``pp > 1`` it must say the draws were enumerated with per-stage generators (each
    stage process has its own generator; certificates without it predate that model)."""
    masks = [n[2][0] for n in table.nodes if n[0] == "INPUT" and n[2]
             and isinstance(n[2][0], str) and n[2][0].startswith("dropout:")]
    if not masks:
        return
    if not any(isinstance(a, str) and a.startswith(RNG_ASSUMPTION)
               for a in cert.get("assumptions", ())):
        raise _fail(f"verdict EQUIVALENT with dropout mask {masks[0]!r} but without the "
                    f"'{RNG_ASSUMPTION} ...' assumption (the RNG obligation)")
    pp = cert.get("binding", {}).get("pp", 1)
    if isinstance(pp, int) and pp > 1 and not any(
            isinstance(a, str) and a.startswith(RNG_ASSUMPTION) and PER_STAGE in a
            for a in cert.get("assumptions", ())):
        raise _fail(f"verdict EQUIVALENT with dropout mask {masks[0]!r} in a pipeline plan "
                    f"(pp={pp}) without the '{PER_STAGE}' rng assumption: dropout inside "
                    "pipeline stages is not modelled that way")
