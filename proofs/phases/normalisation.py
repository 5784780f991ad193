"""The ``reuse`` and ``rewrite`` phases: goals identical up to renaming are proved once, and the
certifying normaliser (``rewriting/``, ``proofs/normal.py``, ``proofs/executor.py``) brings both
sides of the others to normal form; equal normal forms are a proof (``docs/cli.md`` steps 3-4).
A second pass normalises the goals still open with the spec's assumed denominators nonzero
(``proofs/denominators.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from proofs.normal import NormaliseResult
from proofs.obligations import group_identical
from proofs.phases.ledger import Budget, GoalResult, ProofLog, Work
from proofs.phases.smt import first_difference, smt_fallback
from proofs.smt_fallback import Z3Fallback

if TYPE_CHECKING:
    from proofs.executor import ExecutorStats

__all__ = ["AssumedDenominators", "mark_renamings", "normalise", "normalise_assuming"]


@dataclass(frozen=True)
class AssumedDenominators:
    """The spec's assumed denominators, worked out once per run: ``signs`` (the
    :class:`rewriting.signs.Signs` with them nonzero) and ``entries`` (the certificate's
    ``denominators``, each with its proof; ``docs/certificate.md``)."""

    signs: Any
    entries: list[dict[str, Any]]


def mark_renamings(problem: Any, work: Work, cutting: bool) -> None:
    """Point each goal that is a renaming of an earlier one at it (``reuses``): proved once.
    The cut lemmas were grouped when they were built, so nothing is done when ``cutting``."""
    if cutting:
        return
    for name, src in group_identical(problem.goals).items():
        work.by_name[name].reuses = src


def normalise(work: Work, binding: Any, log: ProofLog, budget: Budget) -> ExecutorStats:
    """Normalise both sides of every goal of ``work`` that reuses nothing and has no reason
    (:func:`proofs.executor.normalise_goals_parallel`); returns where that ran."""
    from proofs.executor import ExecutorStats, normalise_goals_parallel

    stats = ExecutorStats()
    todo = [g for g in work.goals if g.reuses is None and not g.reason]
    if not todo:
        return stats
    res: NormaliseResult = normalise_goals_parallel(
        [(g.name, g.expected, g.actual) for g in todo], binding, log.steps, log.table, log.node,
        jobs=budget.jobs, executor=budget.executor, worker_memory_gb=budget.worker_memory_gb,
        progress=budget.progress, deadline=budget.deadline, stats=stats)
    _take_normal_forms(todo, res, work, log)
    return stats


def normalise_assuming(work: Work, binding: Any, dens: Any, log: ProofLog, z3: Z3Fallback,
                       budget: Budget, assumed: AssumedDenominators | None
                       ) -> AssumedDenominators | None:
    """Goals still open after the proofs, normalised again with the spec's assumed
    denominators nonzero, then the z3 / cas fallback on them.

    Their proofs rest on those assumptions, which a renaming does not carry: goals reusing
    them are proved on their own here (the checker rejects a rename of such a proof).

    Args:
        dens: the spec's denominators (:class:`proofs.denominators.SpecDenominators`).
        assumed: what an earlier call worked out, or None.

    Returns:
        ``assumed``, or the denominators worked out now when there was none and some goal
        needed them.
    """
    from proofs.denominators import assumed_signs
    from proofs.normal import normalise_goals

    open_ = [g for g in work.goals if g.name in work.nf and g.status == "open"
             and id(g) not in work.goal_signs]
    if not dens.assumed or not open_ or budget.timed_out():
        return assumed
    if assumed is None:
        assumed = AssumedDenominators(*assumed_signs(dens, binding, log.steps, log.node,
                                                     deadline=budget.deadline))
    names = {g.name for g in open_}
    members = [g for g in work.goals if g.reuses in names and g.status == "open"]
    for g in members:
        g.reuses = None
    redo = open_ + members
    # from the first pass's normal forms where there are some (its steps hold under more
    # facts too, and the normal forms are small), else from the goal's terms
    start = {g.name: work.nf.pop(g.name, None) for g in redo}
    for g in redo:
        g.reason = ""
        work.goal_signs[id(g)] = assumed.signs
    res = normalise_goals([(g.name, *(start[g.name][:2] if start[g.name] else
                                     (g.expected, g.actual))) for g in redo],
                          binding, log.steps, log.node, progress=budget.progress,
                          deadline=budget.deadline, signs=assumed.signs)
    for name, (ne, na, se, sa) in list(res.chains.items()):
        if start[name] is not None:
            res.chains[name] = (ne, na, log.steps.trans([start[name][2], se]),
                                log.steps.trans([start[name][3], sa]))
    _take_normal_forms(redo, res, work, log)
    smt_fallback(work, log, z3, budget, binding,
                 [g for g in redo if g.name in work.nf and g.status == "open"])
    return assumed


def _take_normal_forms(todo: list[GoalResult], res: NormaliseResult, work: Work,
                       log: ProofLog) -> None:
    """Equal normal forms prove a goal (``trans(p_e, sym(p_a))``); differing ones go to
    ``work.nf`` for the smt phase, with the first difference as the goal's reason."""
    steps = log.steps
    log.rule_counts.update(res.rule_counts)
    for g in todo:
        if g.name in res.failed:
            g.reason = res.failed[g.name]
            continue
        nf_e, nf_a, se, sa = res.chains[g.name]
        if nf_e is nf_a:
            g.status, g.method = "proved", "rewrite"
            g.proof = steps.trans([se, steps.sym(sa)]) if (se, sa) != (None, None) else None
            if g.proof is None or steps.steps[g.proof]["kind"] == "refl":
                g.proof = steps.chain(log.node(g.expected), [se, steps.sym(sa)])
        else:
            work.nf[g.name] = (nf_e, nf_a, se, sa)
            g.reason = "normal forms differ: " + first_difference(nf_e, nf_a)
