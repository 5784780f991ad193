"""The ``refute`` phase: float64 evaluation of every goal on random inputs, a divergence confirmed
at the real sizes before it is a counterexample (``proofs/confirm.py``, ``proofs/refute.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from proofs.counterexample import Counterexample, schedule_context
from proofs.phases.ledger import GoalResult, Progress
from proofs.phases.shapes import Shapes
from proofs.reduction import eval_cost
from proofs.refute import asymmetry_note
from spec_lang.term import Binding

__all__ = ["Refuted", "refute_goals", "whole_refute_affordable", "WHOLE_REFUTE_MAX_EVAL"]

WHOLE_REFUTE_MAX_EVAL = 2_000_000_000  # evaluated elements (eval_cost) of the whole-program
                                       # search after cut proofs fail


@dataclass(frozen=True)
class Refuted:
    """What the whole-program refuter found: the confirmed ``counterexample`` (None: none) and
    ``notes``, goal name -> a divergence seen only where it is not a counterexample (a reduced
    mesh, reduced sizes); a note never stops a goal from being proved."""

    counterexample: Counterexample | None
    notes: Mapping[str, str] = field(default_factory=dict)


def refute_goals(problem: Any, goals: list[GoalResult], shapes: Shapes,
                 progress: Progress) -> Refuted:
    """Search for a divergence and confirm it at the real sizes (:func:`proofs.confirm.search`).

    On a counterexample the mismatched goals of ``goals`` (the problem's goals) are marked
    ``refuted`` and the other open ones "not attempted"; the counterexample gets its schedule
    context (the uneven gradient buffer of a pipeline), an asymmetry note when one rank's
    constants make the difference, and a note naming where the divergence starts in the
    user's code (:mod:`proofs.divergence`, messages only)."""
    from proofs.confirm import search
    from proofs.divergence import divergence_start

    by_name = {g.name: g for g in goals}
    progress("refute", 0, len(goals))
    r, notes = search(problem.goals, problem.binding, shapes.reduced, shapes.mesh,
                      shapes.mesh_red)
    progress("refute", len(goals), len(goals))
    cx = r.counterexample
    if cx is None:
        return Refuted(None, dict(notes))
    cx.schedule = schedule_context(problem.schedule, cx.goal, cx.kind, cx.rank)
    if cx.schedule is not None and cx.schedule["hook_site"]:
        cx.site = cx.schedule["hook_site"]   # the uneven buffer is the schedule's doing
    g0 = next(x for x in problem.goals if x.name == cx.goal)
    note = asymmetry_note(g0.expected, g0.actual, Binding(cx.reduced_binding), cx.seed)
    if note:
        cx.notes.append(note)
    start = divergence_start(g0.expected, g0.actual, Binding(cx.reduced_binding), cx.seed,
                             cx.edge)
    if start is not None and start.plan_site and start.plan_site != cx.site \
            and not start.at_goal:
        cx.notes.append(start.note)   # where the divergence starts (proofs/divergence.py)
    for g in r.mismatched:
        by_name[g.name].status = "refuted"
        by_name[g.name].reason = "values differ on random inputs"
    by_name[cx.goal].reason = cx.ratio_text
    for g in goals:
        if g.status == "open" and not g.reason:
            g.reason = "not attempted: the plan is refuted"
    return Refuted(cx, dict(notes))


def whole_refute_affordable(problem: Any, goals: list[GoalResult], shapes: Shapes) -> bool:
    """The whole-program search fits ``WHOLE_REFUTE_MAX_EVAL`` evaluated elements (on the
    reduced mesh when there is one); otherwise the open goals get that as a reason."""
    mr = shapes.mesh_red
    roots = [t for g in problem.goals for t in (g.expected, g.actual)]
    cost = eval_cost(mr.roots, mr.binding) if mr.reduced else eval_cost(roots, shapes.reduced)
    if cost <= WHOLE_REFUTE_MAX_EVAL:
        return True
    for g in goals:
        if g.status == "open":
            g.reason += f"; the whole-program refuter was skipped ({cost:.1e} elements)"
    return False
