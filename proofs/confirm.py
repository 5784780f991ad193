"""The refute phase's rule: a divergence is NOT EQUIVALENT only where it is one at the real sizes.

The search evaluates every goal at the real sizes when that is affordable
(``REAL_SEARCH_MAX_EVAL`` elements), else on a reduced mesh (``proofs.reduction.reduce_mesh``)
and at reduced dims (``proofs.reduction.reduce_binding``). A divergence found below the real
sizes is a search result, never a verdict. It is *confirmed* by evaluating the diverging goals
again at the real mesh and at the **confirmation binding**: every size class of their terms
(``proofs.admissible``) at its real sizes, except the classes whose reduction Corollary C of
``docs/soundness.md`` allows (admissible, and only total ops on values summed over them), which
keep their reduced sizes. A divergence there is a divergence at the real sizes, whatever
literals the plan holds (a literal that stands for a size makes its class fixed through the
``DIM_SIZE`` or count it replaces, so that class is evaluated at its real size). The checker
applies the same rule to the replay binding (``proofs/checker.py``).

When the diverging goals are affordable at the real sizes (``REAL_CONFIRM_MAX_EVAL``), the
divergence is sought there instead (six draws) and reported only if it shows: no rule about
literals is needed (adversarial finding 4: a literal Rule L does not recognise). Rule L is used
only where the real sizes are out of reach.

Otherwise the divergence is a *note* on the goal: the goal is still normalised and proved when it
can be (a literal ``1/8`` for ``1/|B|`` with ``B = 8`` proves EQUIVALENT), and an open goal
reports the note as its reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from proofs.admissible import MESH_AXES, Admissibility, analyse, refutation_problems, \
    replay_error
from proofs.kernel import NodeTable, from_terms
from proofs.reduction import MeshReduction, eval_cost
from proofs.refute import Refutation, refute, refute_reduced_mesh
from spec_lang.term import Binding, Term

__all__ = ["REAL_SEARCH_MAX_EVAL", "CONFIRM_MAX_EVAL", "search", "confirmation_binding",
           "replay_binding_error"]

REAL_SEARCH_MAX_EVAL = 4_000_000   # evaluated elements (eval_cost) of a search at the real sizes
REAL_SEEDS = (0, 1, 2, 3, 4, 5)    # draws at the real sizes (refute() stops at the first hit
#                                    or after SECOND_SEED_MAX_S): a top-1 router can route every
#                                    token of one draw to one expert and hide a scaling bug
CONFIRM_MAX_EVAL = 300_000_000     # ... of a confirmation (real mesh, confirmation binding)
REAL_CONFIRM_MAX_EVAL = 50_000_000  # a reduced-size divergence is re-sought at the real sizes
#                                    when its goals cost at most this there (~400 MB kept)


def _analyse(goals: Sequence[Any], real: Mapping[str, int]) -> Admissibility:
    roots: list[Term] = [t for g in goals for t in (g.expected, g.actual)]
    table = NodeTable()
    ids = from_terms(table, roots)
    return analyse(table.nodes, [ids[id(t)] for t in roots], real)


def confirmation_binding(goals: Sequence[Any], real: Binding, found: Mapping[str, int]
                         ) -> tuple[Binding, list[str]]:
    """The binding at which a divergence of ``goals`` (found at ``found``: real mesh, reduced
    dims) is reported as one at the real sizes: ``found`` with every dim the rule rejects put back
    to its real size; and why those dims were (one line each)."""
    adm = _analyse(goals, real)
    out = {k: int(found.get(k, v)) if k not in MESH_AXES else int(v) for k, v in real.items()}
    why: list[str] = []
    for _ in range(len(out) + 1):
        probs = refutation_problems(adm, real, out)
        if not probs:
            break
        for dims, reason in probs:
            why.append(reason)
            for d in dims:
                c = adm.of(d)
                for x in (c.dims if c is not None else (d,)):
                    out[x] = int(real[x])
    return Binding(out), why


def replay_binding_error(goals: Sequence[Any], real: Mapping[str, int],
                         b: Mapping[str, int]) -> str | None:
    """The checker's rule on a NOT EQUIVALENT replay binding (:func:`proofs.admissible.
    replay_error`; ``None``: allowed)."""
    roots: list[Term] = [t for g in goals for t in (g.expected, g.actual)]
    table = NodeTable()
    ids = from_terms(table, roots)
    return replay_error(table.nodes, [(g.name, ids[id(g.expected)], ids[id(g.actual)])
                                      for g in goals], real, b)


def _confirm(r: Refutation, goals: Sequence[Any], real: Binding, found: Binding,
             mesh: Mapping[str, int]) -> tuple[Refutation, dict[str, str]]:
    """A refutation found at ``found`` (real mesh), confirmed or turned into notes."""
    if r.counterexample is None:
        return r, {}
    names = {g.name for g in r.mismatched}
    bad = [g for g in goals if g.name in names]
    sizes = ", ".join(f"{k}={v}" for k, v in found.items() if v != real[k])
    if dict(found) != {k: int(v) for k, v in real.items()} and \
            eval_cost([t for g in bad for t in (g.expected, g.actual)], real) <= REAL_CONFIRM_MAX_EVAL:
        # the real sizes are affordable for the diverging goals: the divergence is reported only
        # if it shows there (adversarial finding 4: a literal that Rule L does not recognise,
        # 1025/4098 = (|S2|+1)/(2(|S|+1)), made a plan equal at the real sizes diverge below them)
        again = refute(bad, real, mesh, seeds=REAL_SEEDS)
        if again.counterexample is not None:
            return again, dict(again.skipped)
        note = (f"refuter: values differ at reduced sizes ({sizes}) but not at the real sizes "
                f"({len(REAL_SEEDS)} draws): not a counterexample")
        return Refutation([], None, {}), {**again.skipped, **{g.name: note for g in bad}}
    b, why = confirmation_binding(bad, real, found)
    if dict(b) == {k: int(v) for k, v in found.items()} and \
            replay_binding_error(bad, real, found) is None:
        return r, {}
    why = why or [replay_binding_error(bad, real, found) or "the confirmation rule"]
    cost = eval_cost([t for g in bad for t in (g.expected, g.actual)], b)
    if cost > CONFIRM_MAX_EVAL:
        note = (f"refuter: values differ at reduced sizes ({sizes}) only; {why[0]}, and "
                f"evaluating there costs {cost:.2g} > {CONFIRM_MAX_EVAL:.2g} elements, so it is "
                f"not reported as a counterexample")
        return Refutation([], None, {}), {g.name: note for g in bad}
    again = refute(bad, b, mesh)
    if again.counterexample is not None:
        err = replay_binding_error(again.mismatched, real, again.counterexample.reduced_binding)
        if err is None:
            return again, {n: w for n, w in again.skipped.items()}
    note = (f"refuter: values differ at reduced sizes ({sizes}) but not with the size-dependent "
            f"dims at their real sizes ({why[0]}): not a counterexample")
    return Refutation([], None, {}), {**again.skipped, **{g.name: note for g in bad}}


def search(goals: Sequence[Any], real: Binding, reduced: Binding, mesh: Mapping[str, int],
           mr: MeshReduction | None) -> tuple[Refutation, dict[str, str]]:
    """The refute phase: ``(confirmed refutation, notes per goal)``; a note never stops a goal
    from being proved (see the module docstring)."""
    roots = [t for g in goals for t in (g.expected, g.actual)]
    if eval_cost(roots, real) <= REAL_SEARCH_MAX_EVAL:
        r = refute(goals, real, mesh, seeds=REAL_SEEDS)
        if r.counterexample is not None or dict(reduced) == dict(real):
            return r, dict(r.skipped)
        # the reduced sizes draw other values: search there too, and confirm
        r2 = refute(goals, reduced, mesh)
        out, notes = _confirm(r2, goals, real, reduced, mesh)
        return out, {**r.skipped, **notes}
    if mr is None or not mr.reduced:
        r = refute(goals, reduced, mesh)
        out, notes = _confirm(r, goals, real, reduced, mesh)
        return out, {**r.skipped, **notes}
    # search on the reduced mesh; the diverging goals again at the real mesh (rank-symmetry.md)
    r0, _ = refute_reduced_mesh(list(goals), real, mr=mr)
    assert r0 is not None
    names = {g.name for g in r0.mismatched} | {n for n in r0.skipped if n != "*"}
    if not names and "*" not in r0.skipped:
        return r0, {}
    sub = list(goals) if "*" in r0.skipped else [g for g in goals if g.name in names]
    cost = eval_cost([t for g in sub for t in (g.expected, g.actual)], reduced)
    if cost <= CONFIRM_MAX_EVAL:
        r = refute(sub, reduced, mesh)
        out, notes = _confirm(r, sub, real, reduced, mesh)
        return out, {**r.skipped, **notes}
    too = (f"the real mesh sizes are too large to confirm by evaluation ({cost:.2g} > "
           f"{CONFIRM_MAX_EVAL:.2g} elements), so it is not reported as a counterexample")
    cx = r0.counterexample
    notes: dict[str, str] = {}
    for g in r0.mismatched:
        what = ""
        if cx is not None and g.name == cx.goal:
            rank = mr.real_rank(cx.rank)
            what = (" (first at real rank (" + ",".join(f"{a}={v}" for a, v in rank.items())
                    + "), plan " + cx.ratio_text + ")")
        notes[g.name] = f"refuter: values differ on the reduced mesh {mr.describe()}{what}; {too}"
    return Refutation([], None, {}), notes
