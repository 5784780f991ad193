"""What the prover's phases share: the goal records, the obligations at work, the proof log, the
time budget and the phase clock (``proofs/phases/__init__.py`` lists the phases).

Nothing here decides anything: these are the typed values :func:`proofs.prover.prove` passes
from phase to phase instead of attributes of one run object (issue 14 item 4).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from proofs.certificate import ProofSteps
from proofs.kernel import NodeTable, from_terms
from spec_lang.term import Term

__all__ = ["GoalResult", "NormalPair", "Work", "ProofLog", "Budget", "PhaseClock", "Progress",
           "PhaseDone"]

# progress(phase, done, total) within a phase (proofs/progress.py draws it)
Progress = Callable[[str, int, int], None]
# a phase ended: (phase, its seconds this time, unit of its counts: "goals" or "lemmas")
PhaseDone = Callable[[str, float, str], None]
# a goal's two normal forms and the steps proving expected == nf_e and actual == nf_a
NormalPair = tuple[Term, Term, int, int]
T = TypeVar("T")


@dataclass
class GoalResult:
    """One obligation's state: a goal of the problem, or a cut lemma or premise while cutting.

    Phases update ``status``, ``method``, ``reason``, ``reuses``, ``proof`` and
    ``reuses_lemma`` in place; :class:`proofs.prover.Report` holds the goals' records.
    """

    name: str
    kind: str
    layer: str | None
    site: str
    placement: str
    expected: Term
    actual: Term
    status: str = "open"          # "proved" | "refuted" | "open"
    method: str | None = None     # "rewrite" | "smt" | "reused"
    reason: str = ""
    reuses: str | None = None
    proof: int | None = None      # step id
    reuses_lemma: bool = False    # proved through a lemma reused from an identical layer

    @classmethod
    def of(cls, ob: Any) -> GoalResult:
        """The open record of a :class:`spec_lang.problem.Goal` or a
        :class:`proofs.cut.Obligation` (both have name, kind, layer, site, placement, expected,
        actual)."""
        return cls(ob.name, ob.kind, ob.layer, ob.site, ob.placement, ob.expected, ob.actual)


@dataclass(frozen=True)
class Work:
    """The obligations the proof phases (``reuse``, ``rewrite``, ``smt``) work on: the problem's
    goals, or the cut lemmas and premises (:mod:`proofs.phases.cutting`).

    Attributes:
        goals: the records, in order.
        by_name: ``goals`` by name (names are unique).
        nf: goal name -> its two differing normal forms (:data:`NormalPair`), left by
            ``rewrite`` for ``smt``; the retry of failed premises shares the dict.
        goal_signs: ``id(record)`` -> the :class:`rewriting.signs.Signs` its normal forms rest
            on (set when normalised with the spec's assumed denominators).
    """

    goals: list[GoalResult]
    by_name: dict[str, GoalResult]
    nf: dict[str, NormalPair] = field(default_factory=dict)
    goal_signs: dict[int, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, goals: list[GoalResult], *, nf: dict[str, NormalPair] | None = None,
           goal_signs: dict[int, Any] | None = None) -> Work:
        return cls(goals, {g.name: g for g in goals}, {} if nf is None else nf,
                   {} if goal_signs is None else goal_signs)


@dataclass
class ProofLog:
    """The certificate's node table and proof steps, grown by every phase that proves.

    Attributes:
        table: hash-consed nodes (:class:`proofs.kernel.NodeTable`).
        steps: the proof steps (:class:`proofs.certificate.ProofSteps`).
        node_of: ``id(term)`` -> node id in ``table``.
        rule_counts: rewrite rule name -> steps using it.
    """

    table: NodeTable = field(default_factory=NodeTable)
    steps: ProofSteps = field(default_factory=ProofSteps)
    node_of: dict[int, int] = field(default_factory=dict)
    rule_counts: Counter = field(default_factory=Counter)
    keep: list[Term] = field(default_factory=list)   # the terms whose ids node_of holds

    def node(self, t: Term) -> int:
        """The node id of ``t``, adding it (and its subterms) to the table if new."""
        i = self.node_of.get(id(t))
        if i is None:
            self.keep.append(t)  # ids stay valid while the terms are alive
            from_terms(self.table, [t], self.node_of)
            i = self.node_of[id(t)]
        return i


@dataclass(frozen=True)
class Budget:
    """The run's limits: wall-clock ``deadline`` (``time.monotonic()``), worker processes
    ``jobs``, ``executor`` (``"local"`` or ``"ray"``), ``worker_memory_gb`` (None: the
    executor's default) and the ``progress`` callback."""

    deadline: float
    jobs: int
    executor: str
    worker_memory_gb: float | None
    progress: Progress

    def timed_out(self) -> bool:
        return time.monotonic() > self.deadline

    def left(self) -> float:
        """Seconds left, at least 0.1."""
        return max(0.1, self.deadline - time.monotonic())


class PhaseClock:
    """Times phases: ``seconds[phase]`` sums every run of a phase (a phase run inside another is
    counted in both), and ``on_phase(phase, seconds, unit)`` is called as each run ends, also
    when it raises (``docs/cli.md``, "Progress")."""

    def __init__(self, on_phase: PhaseDone):
        self.on_phase = on_phase
        self.seconds: dict[str, float] = {}

    def run(self, name: str, unit: str, f: Callable[..., T], *args: Any, **kw: Any) -> T:
        t0 = time.monotonic()
        try:
            return f(*args, **kw)
        finally:
            dt = time.monotonic() - t0
            self.seconds[name] = self.seconds.get(name, 0.0) + dt
            self.on_phase(name, dt, unit)
