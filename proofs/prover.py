"""The prover pipeline: refute, normalise, decide, fall back to Z3, give a verdict.

:func:`prove` is one readable function of named phases (STYLE rule 13), each a function of
:mod:`proofs.phases` that takes what it needs and returns a value::

    reduce shapes -> rng -> cut (lemmas) | refute -> reuse -> rewrite (certified normal forms)
        -> smt (cas, z3, egglog oracle) -> rewrite (assumed denominators)
        -> [rewrite: failed cut premises whole] -> verdict

The verdict is ``EQUIVALENT`` only if every goal is discharged by a certified method (a
replayable rewrite chain, or a z3 ``unsat`` on the regenerated query); ``NOT EQUIVALENT`` when
the refuter finds a mismatch; otherwise ``UNKNOWN`` with each open goal and its reason. A
timeout, an op without rules or encoding, or an egglog-only answer never gives EQUIVALENT.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from proofs.certificate import ProofSteps
from proofs.counterexample import Counterexample
from proofs.kernel import NodeTable
from proofs.phases.cutting import CutOutcome, cut_goals, retry_whole
from proofs.phases.dropout import add_rng_notes, check_dropout
from proofs.phases.ledger import (
    Budget, GoalResult, PhaseClock, PhaseDone, Progress, ProofLog, Work,
)
from proofs.phases.normalisation import mark_renamings, normalise, normalise_assuming
from proofs.phases.refutation import refute_goals
from proofs.phases.shapes import reduce_shapes
from proofs.phases.smt import smt_fallback
from proofs.phases.verdict import VERDICTS, decide
from proofs.smt_fallback import ASSUMPTION as SHAPE_REDUCTION, Z3Fallback
from proofs.unknown import Explanation, explain, explain_unsupported
from spec_lang.term import Binding

__all__ = ["prove", "Report", "GoalResult", "VERDICTS"]


@dataclass
class Report:
    """What :func:`prove` found (``docs/cli.md``; ``proofs/certificate.py`` writes it out).

    Attributes:
        verdict: one of :data:`VERDICTS`.
        path: the plan file.
        goals: every goal's record (status, method, reason, proof step).
        counterexample: the confirmed divergence behind a NOT EQUIVALENT, else None.
        seconds: phase -> seconds (``PhaseClock``; the CLI adds trace, load, certificate, check).
        rule_counts: rewrite rule name -> steps using it.
        binding, reduced: the real and the reduced sizes.
        assumptions: what the verdict rests on, in order (the problem's, the spec's
            denominators, the dropout renaming, the shape-reduction theorem when z3 used it).
        problem: the :class:`spec_lang.problem.Problem` proved.
        table, steps, node_of: the certificate's node table, proof steps, ``id(term)`` -> node.
        executor: where normalisation ran (:class:`proofs.executor.ExecutorStats` as JSON).
        lemma_counts: with cutting, lemma obligations total / by rewriting / by z3 / reused /
            open, and cuts; else empty.
        denominators: the spec denominators assumed nonzero, as certificate entries
            (``proofs/denominators.py``).
        unsupported: ``(goal, reason)`` of outputs the front end could not lower (never
            EQUIVALENT).
    """

    verdict: str
    path: str
    goals: list[GoalResult]
    counterexample: Counterexample | None
    seconds: dict[str, float]
    rule_counts: Counter
    binding: Binding
    reduced: Binding
    assumptions: tuple[str, ...]
    problem: Any = None
    table: NodeTable = field(default_factory=NodeTable)
    steps: ProofSteps = field(default_factory=ProofSteps)
    node_of: dict[int, int] = field(default_factory=dict)
    executor: dict[str, Any] = field(default_factory=dict)
    lemma_counts: dict[str, int] = field(default_factory=dict)
    denominators: list[dict[str, Any]] = field(default_factory=list)
    unsupported: tuple[tuple[str, str], ...] = ()

    @property
    def counts(self) -> dict[str, int]:
        c = Counter("reused" if g.reuses_lemma else g.method for g in self.goals
                    if g.status == "proved")
        return {"total": len(self.goals), "rewrite": c["rewrite"], "smt": c["smt"],
                "reused": c["reused"], "open": sum(g.status == "open" for g in self.goals),
                "refuted": sum(g.status == "refuted" for g in self.goals)}

    @property
    def open_goals(self) -> list[GoalResult]:
        return [g for g in self.goals if g.status == "open"]

    def to_json(self) -> dict[str, Any]:
        from proofs.first_difference import first_differences

        diffs = first_differences(self.open_goals)
        return {
            "verdict": self.verdict, "plan": self.path, "counts": self.counts,
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "open": [{"goal": g.name, "reason": g.reason, **_why(explain(g.reason)),
                      **_where(g, diffs.get(g.name))} for g in self.open_goals]
            + [{"goal": n, "reason": f"not lowered: {why}", **_why(explain_unsupported(n, why)),
                "spec_site": None, "plan_site": None, "difference": None}
               for n, why in self.unsupported],
            "counterexample": self.counterexample.to_json() if self.counterexample else None,
            "rule_counts": dict(sorted(self.rule_counts.items())),
            "assumptions": list(self.assumptions),
            "obligations": dict(self.lemma_counts),
        }


def _why(ex: Explanation) -> dict[str, str]:
    """An open goal's explanation for ``--json`` (``docs/unknown.md``)."""
    return {"code": ex.code, "explanation": ex.text, "next": ex.next}


def _where(g: GoalResult, d: Any) -> dict[str, Any]:
    """Where an open goal's two sides stop matching (``proofs/first_difference.py``):
    ``spec_site``, ``plan_site`` (``file:line`` or None) and ``difference`` (words or None);
    without a structural difference, ``plan_site`` is the line that produces the goal."""
    if d is not None and (d.spec_site or d.plan_site):
        return d.to_json()
    return {"spec_site": None, "plan_site": g.site if g.site and not g.site.startswith("<")
            else None, "difference": None}


def _quiet(*_: Any) -> None:
    return None


# ---------------------------------------------------------------------------------------------
def prove(problem: Any, *, jobs: int = 1, timeout_s: float = 600.0,
          progress: Progress | None = None, executor: str = "local",
          worker_memory_gb: float | None = None, on_phase: PhaseDone | None = None) -> Report:
    """Prove every goal of ``problem`` (a ``spec_lang.Problem``) or refute one.

    Args:
        problem: goals, binding, mesh and assumptions from ``spec_lang.load``.
        jobs: worker processes for normalising independent obligation groups and for the
            Z3 fallback (:mod:`proofs.executor`; small problems stay in-process).
        timeout_s: wall-clock budget; goals still open when it runs out stay open.
        progress: called as ``progress(phase, done, total)`` within a phase.
        on_phase: called as ``on_phase(phase, seconds, unit)`` when a phase ends; ``seconds``
            are added to ``Report.seconds[phase]`` (the summary table), ``unit`` names what the
            phase's progress counts: ``"lemmas"`` for ``cut`` and, when cutting, ``rewrite``
            and ``smt``; ``"goals"`` otherwise (``docs/cli.md``, "Progress").
        executor: ``"local"`` (process pool) or ``"ray"`` (optional extra).
        worker_memory_gb: address-space limit per worker (default: RAM / jobs, <= 8 GB).

    Raises:
        proofs.executor.ExecutorUnavailable: ``executor`` cannot run here (ray not installed).
    """
    budget = Budget(time.monotonic() + timeout_s, max(1, jobs), executor, worker_memory_gb,
                    progress or _quiet)
    clock, log = PhaseClock(on_phase or _quiet), ProofLog()
    z3 = Z3Fallback(log.table, log.node, problem.binding, jobs=budget.jobs,
                    worker_memory_gb=worker_memory_gb, left=budget.left,
                    timed_out=budget.timed_out, progress=budget.progress)
    goals = [GoalResult.of(g) for g in problem.goals]
    # 1a. reduced dim sizes (real mesh sizes), the spec's denominators; dropout streams
    shapes = clock.run("reduce", "goals", reduce_shapes, problem, goals)
    rng = clock.run("rng", "goals", check_dropout, problem, goals, shapes)
    cut, refuted = CutOutcome(), None
    if not rng.open:
        # 1b. one lemma per layer class (proofs/cut.py); 1c. float64 evaluation of every goal
        cut = clock.run("cut", "lemmas", cut_goals, problem, goals, shapes, budget, clock)
        refuted = cut.refuted
        if cut.plan is None and refuted is None:
            refuted = clock.run("refute", "goals", refute_goals, problem, goals, shapes,
                                budget.progress)
        add_rng_notes(rng, refuted.counterexample if refuted is not None else None, goals)
    plan, work, stats, assumed = cut.plan, Work.of(goals), None, None
    if refuted is None or refuted.counterexample is None:
        unit = "lemmas" if plan is not None else "goals"
        work = plan.work() if plan is not None else work
        b = problem.binding
        clock.run("reuse", "goals", mark_renamings, problem, work, plan is not None)
        stats = clock.run("rewrite", unit, normalise, work, b, log, budget)   # 2. normal forms
        clock.run("smt", unit, smt_fallback, work, log, z3, budget, b)        # 3. cas, z3
        assumed = clock.run("rewrite", unit, normalise_assuming, work, b, shapes.dens, log, z3,
                            budget, None)                        # 3a. assumed denominators
        if plan is not None:                                     # 3b. failed premises whole
            again = clock.run("rewrite", unit, retry_whole, work, plan, b, shapes.dens, log,
                              z3, budget, assumed)
            work, plan, assumed = again.work, again.plan, again.assumed
            stats = again.stats if again.stats is not None else stats
    # 4. EQUIVALENT / NOT EQUIVALENT / UNKNOWN
    decision = clock.run("verdict", "goals", decide, problem, goals, work, plan, refuted, rng,
                         shapes, log, budget, clock)
    assumptions = [*problem.assumptions, *shapes.assumptions,
                   *([rng.assumption] if rng.assumption else [])]
    if z3.reduced_used and SHAPE_REDUCTION not in assumptions:
        assumptions.append(SHAPE_REDUCTION)
    return Report(verdict=decision.verdict, path=str(problem.path), goals=goals,
                  counterexample=decision.counterexample, seconds=clock.seconds,
                  rule_counts=log.rule_counts, binding=problem.binding, reduced=shapes.reduced,
                  assumptions=tuple(assumptions), problem=problem, table=log.table,
                  steps=log.steps, node_of=log.node_of,
                  executor=stats.to_json() if stats is not None else {},
                  lemma_counts=dict(decision.lemma_counts),
                  denominators=list(assumed.entries) if assumed is not None else [],
                  unsupported=tuple(problem.unsupported))
