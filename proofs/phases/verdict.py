"""The ``verdict`` phase: ``EQUIVALENT`` only if every goal is proved by a certified method,
``NOT EQUIVALENT`` on a confirmed counterexample, ``UNKNOWN`` otherwise, each open goal with its
reason (``DESIGN.md`` 3.2 step 6)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from proofs.counterexample import Counterexample
from proofs.phases.cutting import CutPlan, assemble_cuts
from proofs.phases.dropout import RngCheck
from proofs.phases.ledger import Budget, GoalResult, PhaseClock, ProofLog, Work
from proofs.phases.refutation import Refuted, refute_goals, whole_refute_affordable
from proofs.phases.shapes import Shapes

__all__ = ["VERDICTS", "Decision", "decide"]

VERDICTS = ("EQUIVALENT", "NOT EQUIVALENT", "UNKNOWN")


@dataclass(frozen=True)
class Decision:
    """The ``verdict`` (one of :data:`VERDICTS`), the ``counterexample`` behind a NOT
    EQUIVALENT, and the cut lemmas' counts (``Report.lemma_counts``; empty when uncut)."""

    verdict: str
    counterexample: Counterexample | None
    lemma_counts: dict[str, int]


def decide(problem: Any, goals: list[GoalResult], work: Work, plan: CutPlan | None,
           refuted: Refuted | None, rng: RngCheck, shapes: Shapes, log: ProofLog,
           budget: Budget, clock: PhaseClock) -> Decision:
    """The verdict on ``goals`` (the problem's records, updated: proofs assembled from ``plan``'s
    lemmas, reuses resolved, every open goal given a reason).

    With ``plan``, goals left open by the lemma proofs send the whole program to the refuter
    first when it has not run (``refuted`` None) and fits its budget: a lemma is a stronger
    statement than its goal, and the refuter is less sensitive on it (random cut inputs).
    Every goal's terms are added to ``log``'s node table (the certificate's obligations)."""
    lemma_counts: dict[str, int] = {}
    if plan is not None:
        lemma_counts = assemble_cuts(goals, work, plan, log)
        if any(g.status == "open" for g in goals) and refuted is None \
                and not budget.timed_out() and whole_refute_affordable(problem, goals, shapes):
            refuted = clock.run("refute", "goals", refute_goals, problem, goals, shapes,
                                budget.progress)
    by_name = {g.name: g for g in goals}
    for g in goals:
        if g.reuses is not None and g.status == "open":
            src = by_name[g.reuses]
            if src.status == "proved":
                g.status, g.method, g.reason = "proved", "reused", ""
            else:
                g.reason = f"same goal as {src.name}, which is open: {src.reason}"
    notes = refuted.notes if refuted is not None else {}
    for name, note in notes.items():   # divergences on the reduced mesh only
        g = by_name.get(name)
        if g is not None and g.status == "open" and note not in g.reason:
            g.reason = f"{g.reason}; {note}" if g.reason else note
    for g in goals:
        if g.status == "open" and not g.reason:
            g.reason = "timeout" if budget.timed_out() else "not proved"
    cx = refuted.counterexample if refuted is not None else None
    if cx is None and rng.notes:
        # colliding dropout draws the refuter did not see: never EQUIVALENT on them, whether
        # the goals were proved whole or through cut lemmas (adversarial finding R5-1)
        why = rng.notes[0] + " (values did not differ on random inputs)"
        for g in goals:
            g.status, g.method = "open", None
            g.reason = g.reason if rng.notes[0] in g.reason else why
    # goals the front end could not lower (an op without a rule): never EQUIVALENT
    if cx is not None:
        verdict = "NOT EQUIVALENT"
    elif not rng.open and goals and not problem.unsupported \
            and all(g.status == "proved" for g in goals):
        # (rng.open: the plan's dropout masks are not a renaming of its true draws)
        verdict = "EQUIVALENT"
    else:
        verdict = "UNKNOWN"
    # every goal's terms are in the certificate's node table
    for g in goals:
        log.node(g.expected)
        log.node(g.actual)
    return Decision(verdict, cx, lemma_counts)
