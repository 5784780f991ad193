"""The ``rng`` phase: the plan's dropout masks must be a renaming of its true draws
(``proofs/rng.py``, ``docs/dsl.md`` "Dropout")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from proofs.counterexample import Counterexample
from proofs.phases.ledger import GoalResult
from proofs.phases.shapes import Shapes
from spec_lang.term import Op, walk

__all__ = ["RngCheck", "check_dropout", "add_rng_notes"]


@dataclass(frozen=True)
class RngCheck:
    """What ``rng`` found.

    Attributes:
        open: the masks are not shown to be a renaming of the draws: every goal stays open
            (UNKNOWN), each with the reason.
        notes: colliding draws (``"rng: ..."``), for the counterexample or the goals' reasons.
        assumption: the verdict's line about the renaming, or None (no plan dropout checked).
    """

    open: bool = False
    notes: tuple[str, ...] = ()
    assumption: str | None = None


def check_dropout(problem: Any, goals: list[GoalResult], shapes: Shapes) -> RngCheck:
    """position -> (stream, offset) of every plan dropout, enumerated at the reduced sizes (real
    mesh) and, within budget, at the real sizes (:func:`proofs.rng.check_rng`). Mask terms that
    are not a renaming of the true draws leave every goal of ``goals`` open with the reason."""
    recs = problem.rng
    if not any(r.side == "plan" for r in recs):
        # a dropout mask in the plan without its stream records cannot be trusted
        if any(t.op is Op.INPUT and str(t.attrs[0]).startswith("dropout:")
               for t in walk([g.actual for g in goals])):
            for g in goals:
                g.reason = "rng: dropout masks without stream records (Problem.rng)"
            return RngCheck(open=True)
        return RngCheck()
    from proofs.rng import check_rng

    mesh = dict(problem.mesh)
    done = []
    for b in (shapes.reduced, problem.binding):
        r = check_rng(recs, b, mesh)
        if not r.checked and b is shapes.reduced:   # the real mesh is over the budget
            from proofs.rng import check_rng_reduced_mesh

            r = check_rng_reduced_mesh(recs, problem.binding, mesh)
        if r.checked:
            done.append(r)
        if not r.modelled or (not r.checked and b is shapes.reduced):
            for g in goals:
                g.reason = f"rng: {r.why}"
            return RngCheck(open=True)
    notes = tuple(f"rng: {c}" for c in done[0].collisions) if done else ()
    where = " and ".join(dict.fromkeys(
        ", ".join(f"{k}={v}" for k, v in sorted(r.sizes.items())) for r in done))
    assumption = (
        "rng: dropout draws are renamed to the spec's mask symbols (equal in distribution: "
        "draws of distinct (stream, offset) are independent Bernoulli(1 - p)); "
        "position -> (stream, offset) enumerated exhaustively at " + where +
        ("" if len(done) == 2 else " (real sizes over the enumeration budget)") +
        ("; on a reduced mesh (the real mesh is over the budget; docs/rank-symmetry.md)"
         if any(done[0].sizes.get(a) != n for a, n in mesh.items()) else "") +
        ("; per-stage generators: each pipeline stage process draws from its own "
         "generator, offsets from 0 (one model chunk per stage, forwards in micro-batch "
         "order)" if any(r.stage is not None for r in recs if r.side == "plan") else ""))
    return RngCheck(False, notes, assumption)


def add_rng_notes(rng: RngCheck, counterexample: Counterexample | None,
                  goals: list[GoalResult]) -> None:
    """Colliding draws: a note on the counterexample, or else the reason of every goal without
    one (the refuter saw no difference, which is never EQUIVALENT on its own)."""
    if not rng.notes:
        return
    if counterexample is not None:
        counterexample.notes.extend(rng.notes)
        return
    for g in goals:
        if not g.reason:
            g.reason = rng.notes[0] + " (values did not differ on random inputs)"
