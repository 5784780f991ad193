"""The prover pipeline: refute, normalise, decide, fall back to Z3, give a verdict.

:func:`prove` is one readable function of named steps (STYLE rule 13)::

    reduce shapes -> refute -> group identical obligations -> normalise (certified)
        -> egglog oracle + Z3 fallback (certified by an smt step) -> verdict

The verdict is ``EQUIVALENT`` only if every goal is discharged by a certified method (a
replayable rewrite chain, or a z3 ``unsat`` on the regenerated query); ``NOT EQUIVALENT`` when
the refuter finds a mismatch; otherwise ``UNKNOWN`` with each open goal and its reason. A
timeout, an op without rules or encoding, or an egglog-only answer never gives EQUIVALENT.
"""

from __future__ import annotations

import time
from collections import Counter
from fractions import Fraction
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from proofs.certificate import ProofSteps
from proofs.counterexample import Counterexample, schedule_context
from proofs.kernel import NodeTable, from_terms
from proofs.normal import NormaliseResult
from proofs.obligations import group_identical
from proofs.reduction import MESH_AXES, eval_cost, reduce_binding, reduce_mesh
from proofs.refute import Refutation, asymmetry_note, refute
from proofs.smt_fallback import ASSUMPTION as SHAPE_REDUCTION, Z3Fallback
from spec_lang.term import Binding, Op, Term, walk

__all__ = ["prove", "Report", "GoalResult", "VERDICTS"]

VERDICTS = ("EQUIVALENT", "NOT EQUIVALENT", "UNKNOWN")
ORACLE_BUDGET_S = 10.0     # egglog oracle, all goals together (advisory only)
ORACLE_GOAL_S = 5.0
CUT_ROUNDS = 5             # cut / refute-lemmas rounds before giving cutting up
LEMMA_REFUTE_MAX_EVAL = 200_000_000  # evaluated elements (eval_cost) of the lemma search
WHOLE_REFUTE_MAX_EVAL = 2_000_000_000  # ... of the whole-program search after cut proofs fail
Progress = Callable[[str, int, int], None]
# a phase ended: (phase, its seconds this time, unit of its counts: "goals" or "lemmas")
PhaseDone = Callable[[str, float, str], None]


@dataclass
class GoalResult:
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


@dataclass
class Report:
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
    executor: dict[str, Any] = field(default_factory=dict)  # proofs.executor.ExecutorStats
    # obligation cutting: lemma obligations total / by rewriting / by z3 / reused / open, cuts
    lemma_counts: dict[str, int] = field(default_factory=dict)
    # the spec denominators assumed nonzero, as certificate entries (proofs/denominators.py)
    denominators: list[dict[str, Any]] = field(default_factory=list)

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
        return {
            "verdict": self.verdict, "plan": self.path, "counts": self.counts,
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "open": [{"goal": g.name, "reason": g.reason} for g in self.open_goals]
            + [{"goal": n, "reason": f"not lowered: {why}"}
               for n, why in getattr(self.problem, "unsupported", ()) or ()],
            "counterexample": self.counterexample.to_json() if self.counterexample else None,
            "rule_counts": dict(sorted(self.rule_counts.items())),
            "assumptions": list(self.assumptions),
            "obligations": dict(self.lemma_counts),
        }


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
    run = _Run(problem, jobs, timeout_s, progress or (lambda *_: None))
    run.on_phase = on_phase or (lambda *_: None)
    run.executor, run.worker_memory_gb = executor, worker_memory_gb
    run.phase("reduce", run.reduce_shapes)        # 1a. reduced dim sizes, real mesh sizes
    run.phase("rng", run.check_rng)               # dropout streams (proofs/rng.py)
    if not run.rng_open:
        run.phase("cut", run.cut)                 # 1b. one lemma per layer class (proofs/cut.py)
        if not run.cutting and not run.refuted_whole:
            run.phase("refute", run.refute)       # 1c. float64 evaluation of every goal
        run.add_rng_notes()
    if run.counterexample is None:
        run.phase("reuse", run.group_identical)   # identical obligations are proved once
        run.phase("rewrite", run.normalise)       # 2. certified normal forms
        run.phase("smt", run.smt_fallback)        # 3. egglog oracle, then Z3 on open goals
        run.phase("rewrite", run.normalise_assuming)  # 3a. with the spec's assumed denominators
        if run.cutting:
            run.phase("rewrite", run.retry_whole)  # 3b. premises that failed cut: whole
    report = run.phase("verdict", run.verdict)    # 4. EQUIVALENT / NOT EQUIVALENT / UNKNOWN
    stats = getattr(run, "exec_stats", None)    # proofs.executor: where normalisation ran
    report.executor = stats.to_json() if stats is not None else {}
    return report


class _Run:
    def __init__(self, problem: Any, jobs: int, timeout_s: float, progress: Progress):
        self.p = problem
        self.jobs = max(1, jobs)
        self.deadline = time.monotonic() + timeout_s
        self.timeout_s = timeout_s
        self.progress = progress
        self.on_phase: PhaseDone = lambda *_: None
        self.seconds: dict[str, float] = {}
        self.goals = [GoalResult(g.name, g.kind, g.layer, g.site, g.placement, g.expected,
                                 g.actual) for g in problem.goals]
        self.by_name = {g.name: g for g in self.goals}
        self.counterexample: Counterexample | None = None
        self.table = NodeTable()
        self.steps = ProofSteps()
        self.node_of: dict[int, int] = {}
        self.keep: list[Term] = []
        self.rule_counts: Counter = Counter()
        self.nf: dict[str, tuple[Term, Term, int, int]] = {}  # name -> (nf_e, nf_a, step_e, step_a)
        self.reduced: Binding = problem.binding
        self._z3: Z3Fallback | None = None   # the z3 fallback (proofs/smt_fallback.py)
        self.assumptions = list(getattr(problem, "assumptions", ()))
        self.mesh = {a: int(n) for a, n in problem.binding.items() if a in MESH_AXES}
        self.dens: Any = None         # proofs.denominators.SpecDenominators (reduce_shapes)
        self.assumed_signs: Any = None  # rewriting.signs.Signs with the assumed denominators
        self.denominator_entries: list[dict[str, Any]] = []   # the certificate's denominators
        self.goal_signs: dict[int, Any] = {}   # id(goal) -> the Signs its normal forms rest on
        self.cutting = False          # goals are proved through cut lemmas (self.cut)
        self.refuted_whole = False    # the whole-program refuter has run
        self.cut_state: Any = None
        self.refute_notes: dict[str, str] = {}   # goal -> an unconfirmed divergence

    def phase(self, name: str, f: Callable[[], Any]) -> Any:
        t0 = time.monotonic()
        try:
            return f()
        finally:
            dt = time.monotonic() - t0
            self.seconds[name] = self.seconds.get(name, 0.0) + dt
            lemmas = name == "cut" or (self.cutting and name in ("rewrite", "smt"))
            self.on_phase(name, dt, "lemmas" if lemmas else "goals")

    def timed_out(self) -> bool:
        return time.monotonic() > self.deadline

    def node(self, t: Term) -> int:
        i = self.node_of.get(id(t))
        if i is None:
            self.keep.append(t)  # ids stay valid while the terms are alive
            from_terms(self.table, [t], self.node_of)
            i = self.node_of[id(t)]
        return i

    # -- 1. refute ----------------------------------------------------------------------------
    def reduce_shapes(self) -> None:
        from proofs.denominators import spec_denominators

        # the spec's denominators: settled by the input domains, or assumed (listed)
        self.dens = spec_denominators([g.expected for g in self.goals])
        self.assumptions.extend(self.dens.assumption_lines())
        roots = [t for g in self.goals for t in (g.expected, g.actual)]
        self.reduced = reduce_binding(roots, self.p.binding)
        # the refuter's search runs on a reduced mesh too (docs/rank-symmetry.md)
        self.mesh_red = reduce_mesh([t for g in self.p.goals for t in (g.expected, g.actual)],
                                    self.p.binding)
        # goals must be lowered (no REGION left): one walk over the shared DAG
        if any(t.op is Op.REGION for t in walk(roots)):
            for g in self.goals:
                if _unsupported(g.expected, g.actual):
                    g.reason = "a REGION node was not lowered (internal)"

    def refute(self) -> None:
        """Search for a divergence and confirm it at the real sizes (:mod:`proofs.confirm`);
        an unconfirmed one is a note on the goal, which is still proved when it can be."""
        from proofs.confirm import search

        self.progress("refute", 0, len(self.goals))
        r, notes = search(self.p.goals, self.p.binding, self.reduced, self.mesh,
                          getattr(self, "mesh_red", None))
        self.refute_notes.update(notes)
        self.progress("refute", len(self.goals), len(self.goals))
        if r.counterexample is not None:
            self.counterexample = r.counterexample
            cx = self.counterexample
            cx.schedule = schedule_context(getattr(self.p, "schedule", None), cx.goal, cx.kind,
                                           cx.rank)
            if cx.schedule is not None and cx.schedule["hook_site"]:
                cx.site = cx.schedule["hook_site"]   # the uneven buffer is the schedule's doing
            g0 = next(x for x in self.p.goals if x.name == cx.goal)
            note = asymmetry_note(g0.expected, g0.actual, Binding(cx.reduced_binding), cx.seed)
            if note:
                cx.notes.append(note)
            for g in r.mismatched:
                self.by_name[g.name].status = "refuted"
                self.by_name[g.name].reason = "values differ on random inputs"
            self.by_name[r.counterexample.goal].reason = r.counterexample.ratio_text
            for g in self.goals:
                if g.status == "open" and not g.reason:
                    g.reason = "not attempted: the plan is refuted"

    # -- dropout streams --------------------------------------------------------------------------
    rng_open = False
    rng_notes: list[str] = []

    def check_rng(self) -> None:
        """position -> (stream, offset) of every plan dropout, enumerated at the reduced sizes
        (real mesh) and, within budget, at the real sizes (:mod:`proofs.rng`). Mask terms that
        are not a renaming of the true draws leave every goal open (UNKNOWN)."""
        recs = getattr(self.p, "rng", ())
        if not any(r.side == "plan" for r in recs):
            # a dropout mask in the plan without its stream records cannot be trusted
            if any(t.op is Op.INPUT and str(t.attrs[0]).startswith("dropout:")
                   for t in walk([g.actual for g in self.goals])):
                self.rng_open = True
                for g in self.goals:
                    g.reason = "rng: dropout masks without stream records (Problem.rng)"
            return
        from proofs.rng import check_rng

        mesh = dict(self.p.mesh)
        done = []
        for b in (self.reduced, self.p.binding):
            r = check_rng(recs, b, mesh)
            if not r.checked and b is self.reduced:   # the real mesh is over the budget
                from proofs.rng import check_rng_reduced_mesh

                r = check_rng_reduced_mesh(recs, self.p.binding, mesh)
            if r.checked:
                done.append(r)
            if not r.modelled or (not r.checked and b is self.reduced):
                self.rng_open = True
                for g in self.goals:
                    g.reason = f"rng: {r.why}"
                return
        self.rng_notes = [f"rng: {c}" for c in done[0].collisions] if done else []
        where = " and ".join(dict.fromkeys(
            ", ".join(f"{k}={v}" for k, v in sorted(r.sizes.items())) for r in done))
        self.assumptions.append(
            "rng: dropout draws are renamed to the spec's mask symbols (equal in distribution: "
            "draws of distinct (stream, offset) are independent Bernoulli(1 - p)); "
            "position -> (stream, offset) enumerated exhaustively at " + where +
            ("" if len(done) == 2 else " (real sizes over the enumeration budget)") +
            ("; on a reduced mesh (the real mesh is over the budget; docs/rank-symmetry.md)"
             if any(done[0].sizes.get(a) != n for a, n in mesh.items()) else "") +
            ("; per-stage generators: each pipeline stage process draws from its own "
             "generator, offsets from 0 (one model chunk per stage, forwards in micro-batch "
             "order)" if any(getattr(r, "stage", None) is not None for r in recs
                             if r.side == "plan") else ""))

    def add_rng_notes(self) -> None:
        if not self.rng_notes:
            return
        if self.counterexample is not None:
            self.counterexample.notes.extend(self.rng_notes)
            return
        # draws collide but the refuter saw no difference: never EQUIVALENT on it
        for g in self.goals:
            if not g.reason:
                g.reason = self.rng_notes[0] + " (values did not differ on random inputs)"

    # -- reuse ----------------------------------------------------------------------------------
    def group_identical(self) -> None:
        if self.cutting:
            return   # the cut lemmas were grouped when they were built
        for name, src in group_identical(self.p.goals).items():
            g = self.by_name[name]
            g.reuses = src

    # -- 2. normalise ---------------------------------------------------------------------------
    executor = "local"
    worker_memory_gb: float | None = None

    def normalise(self) -> None:
        from proofs.executor import ExecutorStats, normalise_goals_parallel

        self.exec_stats = ExecutorStats()
        todo = [g for g in self.goals if g.reuses is None and not g.reason]
        if not todo:
            return
        res: NormaliseResult = normalise_goals_parallel(
            [(g.name, g.expected, g.actual) for g in todo], self.p.binding, self.steps,
            self.table, self.node, jobs=self.jobs, executor=self.executor,
            worker_memory_gb=self.worker_memory_gb, progress=self.progress,
            deadline=self.deadline, stats=self.exec_stats)
        self._take_normal_forms(todo, res)

    def normalise_assuming(self) -> None:
        """Goals still open after the proofs, normalised again with the spec's assumed
        denominators nonzero (``proofs/denominators.py``), then the z3 / cas fallback on them.
        Their proofs rest on those assumptions, which a renaming does not carry: goals reusing
        them are proved on their own here (the checker rejects a rename of such a proof)."""
        from proofs.denominators import assumed_signs
        from proofs.normal import normalise_goals

        open_ = [g for g in self.goals if g.name in self.nf and g.status == "open"
                 and id(g) not in self.goal_signs]
        if not self.dens.assumed or not open_ or self.timed_out():
            return
        if self.assumed_signs is None:
            self.assumed_signs, self.denominator_entries = assumed_signs(
                self.dens, self.p.binding, self.steps, self.node, deadline=self.deadline)
        names = {g.name for g in open_}
        members = [g for g in self.goals if g.reuses in names and g.status == "open"]
        for g in members:
            g.reuses = None
        redo = open_ + members
        # from the first pass's normal forms where there are some (its steps hold under more
        # facts too, and the normal forms are small), else from the goal's terms
        start = {g.name: self.nf.pop(g.name, None) for g in redo}
        for g in redo:
            g.reason = ""
            self.goal_signs[id(g)] = self.assumed_signs
        res = normalise_goals([(g.name, *(start[g.name][:2] if start[g.name] else
                                         (g.expected, g.actual))) for g in redo],
                              self.p.binding, self.steps, self.node, progress=self.progress,
                              deadline=self.deadline, signs=self.assumed_signs)
        for name, (ne, na, se, sa) in list(res.chains.items()):
            if start[name] is not None:
                res.chains[name] = (ne, na, self.steps.trans([start[name][2], se]),
                                    self.steps.trans([start[name][3], sa]))
        self._take_normal_forms(redo, res)
        self.smt_fallback([g for g in redo if g.name in self.nf and g.status == "open"])

    def _take_normal_forms(self, todo: list[GoalResult], res: NormaliseResult) -> None:
        self.rule_counts.update(res.rule_counts)
        for g in todo:
            if g.name in res.failed:
                g.reason = res.failed[g.name]
                continue
            nf_e, nf_a, se, sa = res.chains[g.name]
            if nf_e is nf_a:
                g.status, g.method = "proved", "rewrite"
                g.proof = self.steps.trans([se, self.steps.sym(sa)]) if (se, sa) != (None, None) \
                    else None
                if g.proof is None or self.steps.steps[g.proof]["kind"] == "refl":
                    g.proof = self.steps.chain(self.node(g.expected), [se, self.steps.sym(sa)])
            else:
                self.nf[g.name] = (nf_e, nf_a, se, sa)
                g.reason = "normal forms differ: " + _first_difference(nf_e, nf_a)

    # -- 3. egglog oracle and Z3 fallback -------------------------------------------------------
    def smt_fallback(self, open_: list[GoalResult] | None = None) -> None:
        """Open goals: exact rational identities (cas) and z3 on the smallest differing subterm
        pairs of the two normal forms; then the egglog oracle, advisory only, for the reason."""

        if open_ is None:
            open_ = [g for g in self.goals if g.name in self.nf and g.status == "open"]
        pairs = {g.name: _differing_pairs(*self.nf[g.name][:2]) for g in open_}
        self._discharge(open_, pairs)
        # congruence may split a pair wrongly (MAXIMUM(x, y) vs MAXIMUM(y, x)): retry the
        # goals still open on their two whole normal forms
        retry = [g for g in open_ if g.status == "open" and len(pairs[g.name]) > 1
                 or (pairs[g.name] and pairs[g.name][0] != self.nf[g.name][:2])]
        if retry and not self.timed_out():
            self._discharge([g for g in retry if g.status == "open"],
                            {g.name: [self.nf[g.name][:2]] for g in retry})
        self.consult_oracle([g for g in open_ if g.status == "open"])

    def _discharge(self, open_: list[GoalResult], pairs: dict[str, list[tuple[Term, Term]]]) -> None:
        from proofs.cas import cas_identity
        from rewriting.signs import CONTEXT_FREE

        keep = []
        for g in open_:  # both sides of a cas / smt step must be defined on the spec's domain
            sg = self.goal_signs.get(id(g), CONTEXT_FREE)
            bad = next((x for e, a in pairs[g.name] for x in (e, a) if not sg.defined(x)), None)
            if bad is None:
                keep.append(g)
            elif "not shown nonzero" not in g.reason:
                g.reason += ("; a denominator in the differing subterms is not shown nonzero on "
                             "the spec's domain (no cas / smt step)")
        open_ = keep
        leaf: dict[tuple[int, int], int] = {}
        for g in open_:  # 3a. rational identities, replayed by the checker with sympy
            for e, a in pairs[g.name]:
                if (id(e), id(a)) not in leaf and not self.timed_out() and \
                        cas_identity(self.table, self.node(e), self.node(a)) is None:
                    leaf[(id(e), id(a))] = self.steps.cas(self.node(e), self.node(a))
        z3 = self.z3_fallback()
        queries, failed_at = [], {}
        for g in open_:  # 3b. z3 on the rest, at the sizes docs/soundness.md allows
            rest = [(e, a) for e, a in pairs[g.name] if (id(e), id(a)) not in leaf]
            for e, a in rest:
                b, why = z3.binding(e, a)
                if b is None:
                    failed_at[g.name] = why
                    break
            else:
                queries.extend((g.name, e, a) for e, a in rest)
        answers = z3.solve(queries)
        used_smt: set[str] = set()
        for g in open_:
            nf_e, nf_a, se, sa = self.nf[g.name]
            failed = failed_at.get(g.name)
            for e, a in pairs[g.name]:
                if failed or (id(e), id(a)) in leaf:
                    continue
                ans = answers.get((id(e), id(a)))
                if ans is None or ans[0] != "unsat":
                    failed = (f"z3 on {e.op.name} vs {a.op.name}: "
                              f"{'timeout' if ans is None else ans[0]}")
                    break
                leaf[(id(e), id(a))] = z3.step(self.steps, e, a, ans[1])
                used_smt.add(g.name)
            if failed:
                if failed not in g.reason:
                    g.reason += "; " + failed
                continue
            mid = _congr_tree(nf_e, nf_a, leaf, self.steps, self.node)
            g.proof = self.steps.chain(self.node(g.expected), [se, mid, self.steps.sym(sa)])
            g.status, g.reason = "proved", ""
            g.method = "smt" if g.name in used_smt else "rewrite"
        if z3.reduced_used and SHAPE_REDUCTION not in self.assumptions:
            self.assumptions.append(SHAPE_REDUCTION)

    def consult_oracle(self, goals: list[GoalResult]) -> None:
        """egglog's verdict on goals still open (uncertified: it only explains the reason).
        Bounded: ORACLE_BUDGET_S in total, ORACLE_GOAL_S per goal."""
        oracle = _egglog_oracle()
        if oracle is None:
            return
        budget = time.monotonic() + min(ORACLE_BUDGET_S, self._left() / 4)
        for g in goals:
            left = budget - time.monotonic()
            if left <= 0.5:
                break
            nf_e, nf_a, _, _ = self.nf[g.name]
            verdict = oracle(nf_e, nf_a, self.p.binding, min(ORACLE_GOAL_S, left))
            if verdict is True:
                g.reason += "; egglog finds them equal (uncertified, not accepted alone)"

    def _left(self) -> float:
        return max(0.1, self.deadline - time.monotonic())

    def z3_fallback(self) -> Z3Fallback:
        if self._z3 is None:
            self._z3 = Z3Fallback(self.table, self.node, self.p.binding, jobs=self.jobs,
                                  worker_memory_gb=self.worker_memory_gb, left=self._left,
                                  timed_out=self.timed_out, progress=self.progress)
        return self._z3

    # -- obligation cutting (proofs/cut.py) -----------------------------------------------------
    def cut(self) -> None:
        """Replace the goals by their cut lemmas and the premises of the cuts they use.

        The lemmas of representatives (one per renaming class) are refuted first; a refuted
        premise of the topmost backward cut with a constant ratio fixes the adjoint factor
        ``c``; otherwise a refuted lemma sends the whole program to the refuter (a real
        counterexample ends the run), and the cuts whose premises failed are dropped (the goals
        whose own lemma failed are proved uncut). At most ``CUT_ROUNDS`` rounds."""
        from proofs.cut import CUT_PREFIX, build_cuts, cut_obligations, input_permutes

        pts = getattr(self.p, "cut_points", ())
        if not pts or any(t.op is Op.INPUT and str(t.attrs[0]).startswith(CUT_PREFIX)
                          for t in walk([x for g in self.goals for x in (g.expected, g.actual)])):
            return
        factor, drop, uncut, whole = Fraction(1), set(), set(), set()
        perms = input_permutes(self.p.goals)
        for _ in range(CUT_ROUNDS):
            cuts = build_cuts(pts, backward_factor=factor, drop=drop, permutes=perms)
            if not cuts or self.timed_out():
                return
            lemmas, premises = cut_obligations(self.p.goals, cuts, uncut=uncut, whole=whole)
            obs = list(lemmas.values()) + list(premises.values())
            reuse = group_identical(obs)
            reps = [o for o in obs if o.name not in reuse]
            self.progress("cut", 0, len(reps))
            r, _ = self._refute_lemmas(reps)
            self.progress("cut", len(reps), len(reps))
            bad = {o.name for o in r.mismatched}
            if factor == 1 and not bad and r.skipped:
                # too large to search: still find the adjoint factor on the topmost backward
                # premises, then let the proofs decide (a wrong cut leaves goals open)
                bad = {o.name for n, o in premises.items() if n.endswith(":adj")
                       and not any(u.endswith(":adj") for u in o.uses)}
                if not bad:
                    self._use_cuts(cuts, lemmas, premises, reuse)
                    return
            elif not bad:
                self._use_cuts(cuts, lemmas, premises, reuse)
                return
            # the topmost backward cuts: their lemma uses no other backward cut
            top = [premises[n] for n in premises if n.endswith(":adj") and
                   premises[n].name in bad and not any(u.endswith(":adj")
                                                       for u in premises[n].uses)]
            if factor == 1 and top:
                # the factor at the real mesh (one small lemma each: the head and the loss)
                from proofs.reduction import eval_cost

                rs = [refute([o], self.reduced, self.mesh, seeds=(0,))
                      if eval_cost([o.expected, o.actual], self.reduced)
                      <= LEMMA_REFUTE_MAX_EVAL else None for o in top]
                if all(x is not None and x.counterexample is None for x in rs):
                    self._use_cuts(cuts, lemmas, premises, reuse)   # factor 1 holds
                    return
                # too large at the real mesh: the monomial in the mesh sizes seen on reduced
                # meshes (proofs.refute.real_mesh_factor); the proofs confirm it or not
                ratios = {_ratio_of(x) if x is not None else _mesh_factor(o, self.p.binding)
                          for x, o in zip(rs, top)}
                if len(ratios) == 1 and None not in ratios:
                    factor = ratios.pop()
                    continue
                drop |= {c.name for c in cuts if c.kind == "backward"}
                continue
            if not self.refuted_whole:
                self.refuted_whole = True
                self.phase("refute", self.refute)
                if self.counterexample is not None:
                    return
            # a premise that fails cut below its value is tried whole (its value stays a cut
            # for the lemmas above it); a premise that fails whole is a cut that does not hold
            members = {n: [o.name for o in obs if reuse.get(o.name, o.name) == n] for n in bad}
            for n in bad:
                for m in members[n]:
                    if m.startswith("premise:"):
                        c = m[len("premise:"):]
                        (drop if c in whole else whole).add(c)
                    else:
                        uncut.add(m[len("lemma:"):])

    def _whole_refute_affordable(self) -> bool:
        """The whole-program search fits ``WHOLE_REFUTE_MAX_EVAL`` evaluated elements (on the
        reduced mesh when there is one); otherwise open goals stay open with their reasons."""
        from proofs.reduction import eval_cost

        mr = getattr(self, "mesh_red", None)
        roots = [t for g in self.p.goals for t in (g.expected, g.actual)]
        cost = eval_cost(mr.roots, mr.binding) if mr is not None and mr.reduced else \
            eval_cost(roots, self.reduced)
        if cost <= WHOLE_REFUTE_MAX_EVAL:
            return True
        for g in self.goals:
            if g.status == "open":
                g.reason += f"; the whole-program refuter was skipped ({cost:.1e} elements)"
        return False

    def retry_whole(self) -> None:
        """Premises still open after the proofs are proved again on their whole terms
        ``E(s) == p`` (no cut below them). A cut premise can be false while the whole one holds:
        a tied embedding's per-stage gradients are traced apart from the cut forward; the
        lemma search normally finds this, but it is skipped above its evaluation budget."""
        from proofs.cut import Obligation

        cuts, lemmas, premises = self.cut_state
        by_cut = {c.name: c for c in cuts}
        def proved(w: GoalResult) -> bool:   # a reused lemma is proved when its source is
            return (self.by_name[w.reuses] if w.reuses is not None else w).status == "proved"

        todo = [n for n, o in premises.items() if o.uses and not proved(self.by_name[o.name])]
        if not todo or self.timed_out():
            return
        saved_goals, saved_by = self.goals, self.by_name
        new = []
        for n in todo:
            c = by_cut[n]
            ob = Obligation("premise:" + n, "premise:" + n, c.inst, c.plan, [], kind="premise",
                            layer=premises[n].layer)
            premises[n] = ob
            new.append(GoalResult(ob.name, ob.kind, ob.layer, "", "", ob.expected, ob.actual))
        self.goals, self.by_name = new, {w.name: w for w in new}
        self.normalise()
        self.smt_fallback()
        self.normalise_assuming()
        for w in new:
            saved_by[w.name] = w
        self.goals = [saved_by[w.name] for w in saved_goals]
        self.by_name = saved_by

    def _refute_lemmas(self, obs: list[Any]) -> tuple[Refutation, Any]:
        """One random draw over the lemmas, on a reduced mesh when the mesh can be cut
        (``docs/rank-symmetry.md``): only a filter for which cuts to keep, never a verdict."""
        from proofs.reduction import reduce_mesh
        from proofs.refute import refute_reduced_mesh

        from proofs.reduction import eval_cost

        roots = [t for o in obs for t in (o.expected, o.actual)]
        mr = reduce_mesh(roots, self.p.binding)
        cost = eval_cost(mr.roots, mr.binding) if mr.reduced else eval_cost(roots, self.reduced)
        if cost > LEMMA_REFUTE_MAX_EVAL:   # e.g. cp16 x tp8 keeps 256 reduced positions
            return Refutation([], None, {o.name: "too large to evaluate" for o in obs}), None
        if mr.reduced:
            r, _ = refute_reduced_mesh(obs, self.p.binding, seeds=(0,), mr=mr)
            if r is not None:
                return r, mr
        return refute(obs, self.reduced, self.mesh, seeds=(0,)), None

    def _use_cuts(self, cuts: list[Any], lemmas: dict[str, Any], premises: dict[str, Any],
                  reuse: dict[str, str]) -> None:
        self.cutting = True
        self.final_goals, self.final_by_name = self.goals, self.by_name
        work = []
        for o in list(lemmas.values()) + list(premises.values()):
            w = GoalResult(o.name, o.kind, o.layer, o.site, o.placement, o.expected, o.actual)
            w.reuses = reuse.get(o.name)
            work.append(w)
        self.goals = work
        self.by_name = {w.name: w for w in work}
        self.cut_state = (cuts, lemmas, premises)

    def assemble_cuts(self) -> None:
        """Goal proofs from the lemma proofs: ``rename`` steps for reused lemmas, ``cut`` steps
        for premises (in dependency order) and goals; then restore the goal list."""
        cuts, lemmas, premises = self.cut_state
        by_cut = {c.name: c for c in cuts}
        work = self.by_name
        for w in self.goals:   # lemmas reused from a renaming class representative
            if w.reuses is not None and w.status == "open":
                src = work[w.reuses]
                if src.status == "proved":
                    w.status, w.method = "proved", src.method
                    w.proof = self.steps.rename(self.node(w.expected), self.node(w.actual),
                                                src.proof)
                    w.reuses_lemma = True
                else:
                    w.reason = f"same lemma as {src.name}, which is open: {src.reason}"
        step: dict[str, int | None] = {}    # cut name -> step proving inst == plan, or None
        why: dict[str, str] = {}

        def cut_step(ob: Any, lhs: Term, rhs: Term, w: GoalResult) -> int | None:
            if w.status != "proved":
                return None
            if any(step.get(u) is None for u in ob.uses):
                return None
            if not ob.uses:
                return w.proof
            items = [(self.node(by_cut[u].spec), self.node(by_cut[u].plan),
                      self.node(by_cut[u].var), self.node(by_cut[u].embed), step[u])
                     for u in ob.uses]
            return self.steps.cut(self.node(lhs), self.node(rhs), w.proof, items)

        order = _premise_order(premises)
        for n in order:
            ob, c, w = premises[n], by_cut[n], work[premises[n].name]
            step[n] = cut_step(ob, c.inst, c.plan, w)
            if step[n] is None:
                bad = [u for u in ob.uses if step.get(u) is None]
                why[n] = w.reason if w.status != "proved" else                     f"premise {bad[0]}: {why.get(bad[0], 'not proved')}"
        self.goals, self.by_name = self.final_goals, self.final_by_name
        for g in self.goals:
            ob = lemmas[g.name]
            w = work[ob.name]
            s = cut_step(ob, g.expected, g.actual, w)
            if s is None:
                bad = [u for u in ob.uses if step.get(u) is None]
                g.reason = w.reason if w.status != "proved" else                     f"premise {bad[0]}: {why.get(bad[0], 'not proved')}"
                continue
            used = [w] + [work[premises[u].name] for u in _closure(ob.uses, premises)]
            g.status, g.proof = "proved", s
            g.method = "smt" if any(x.method == "smt" for x in used) else "rewrite"
            g.reuses_lemma = bool(getattr(w, "reuses_lemma", False))
        rep = [w for w in work.values() if w.reuses is None]
        self.lemma_counts = {
            "obligations": len(work), "rewrite": sum(w.method == "rewrite" and w.status == "proved"
                                                     for w in rep),
            "smt": sum(w.method == "smt" and w.status == "proved" for w in rep),
            "reused": sum(w.reuses is not None and w.status == "proved" for w in work.values()),
            "open": sum(w.status != "proved" for w in work.values()),
            "cuts": len(cuts)}

    # -- 4. verdict -----------------------------------------------------------------------------
    def verdict(self) -> Report:
        if self.cutting:
            self.assemble_cuts()
            if any(g.status == "open" for g in self.goals) and not self.refuted_whole \
                    and not self.timed_out() and self._whole_refute_affordable():
                # a lemma is a stronger statement than its goal, and the refuter is less
                # sensitive on it (random cut inputs): look for a real counterexample first
                self.refuted_whole = True
                self.phase("refute", self.refute)
        for g in self.goals:
            if g.reuses is not None and g.status == "open":
                src = self.by_name[g.reuses]
                if src.status == "proved":
                    g.status, g.method, g.reason = "proved", "reused", ""
                else:
                    g.reason = f"same goal as {src.name}, which is open: {src.reason}"
        for name, note in self.refute_notes.items():   # divergences on the reduced mesh only
            g = self.by_name.get(name)
            if g is not None and g.status == "open" and note not in g.reason:
                g.reason = f"{g.reason}; {note}" if g.reason else note
        for g in self.goals:
            if g.status == "open" and not g.reason:
                g.reason = "timeout" if self.timed_out() else "not proved"
        # goals the front end could not lower (an op without a rule): never EQUIVALENT
        unsupported = tuple(getattr(self.p, "unsupported", ()) or ())
        if self.counterexample is not None:
            verdict = "NOT EQUIVALENT"
        elif not self.rng_open and self.goals and not unsupported \
                and all(g.status == "proved" for g in self.goals):
            # (rng_open: the plan's dropout masks are not a renaming of its true draws)
            verdict = "EQUIVALENT"
        else:
            verdict = "UNKNOWN"
        # every goal's terms are in the certificate's node table
        for g in self.goals:
            self.node(g.expected)
            self.node(g.actual)
        return Report(verdict=verdict, path=str(self.p.path), goals=self.goals,
                      counterexample=self.counterexample, seconds=self.seconds,
                      rule_counts=self.rule_counts, binding=self.p.binding, reduced=self.reduced,
                      assumptions=tuple(self.assumptions),
                      problem=self.p, table=self.table, steps=self.steps, node_of=self.node_of,
                      lemma_counts=dict(getattr(self, "lemma_counts", {})),
                      denominators=list(self.denominator_entries))


# ---------------------------------------------------------------------------------------------
def _ratio_of(r: Refutation) -> Fraction | None:
    """The exact constant ``plan / spec`` of a refutation's first goal (up to 1e-9), or None."""
    x = r.counterexample.ratio if r.counterexample is not None else None
    if x is None or not x:
        return None
    q = Fraction(x).limit_denominator(1 << 16)
    if abs(float(q) - x) > 1e-9 * max(1.0, abs(x)):
        return None
    return q


def _mesh_factor(ob: Any, binding: Binding) -> Fraction | None:
    from proofs.refute import real_mesh_factor

    try:
        q = real_mesh_factor(ob, binding)
    except Exception:  # noqa: BLE001 -- a search aid only: no factor, no backward cuts
        return None
    return Fraction(q) if q is not None and q != 0 else None


def _premise_order(premises: dict[str, Any]) -> list[str]:
    """Cut names, each after the cuts its premise uses (iterative depth-first)."""
    order: list[str] = []
    state: dict[str, int] = {}
    for root in premises:
        stack = [(root, False)]
        while stack:
            n, done = stack.pop()
            if done:
                state[n] = 2
                order.append(n)
                continue
            if state.get(n):
                continue
            state[n] = 1
            stack.append((n, True))
            stack.extend((u, False) for u in premises[n].uses if not state.get(u))
    return order


def _closure(names: list[str], premises: dict[str, Any]) -> set[str]:
    seen: set[str] = set()
    todo = list(names)
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(premises[n].uses)
    return seen


def _egglog_oracle() -> Callable[..., bool | None] | None:
    try:
        from rewriting import decide  # type: ignore[attr-defined]
    except ImportError:
        return None

    def call(e: Term, a: Term, binding: Binding, timeout_s: float) -> bool | None:
        try:
            r = decide(e, a, binding, timeout_s)
        except Exception:  # noqa: BLE001 -- the oracle is advisory; its failure leaves the goal open
            return None
        return r if isinstance(r, bool) else getattr(r, "equal", None)
    return call


def _unsupported(*roots: Term) -> str:
    for t in walk(list(roots)):
        if t.op is Op.REGION:
            return "a REGION node was not lowered (internal)"
    return ""


def _differing_pairs(a: Term, b: Term) -> list[tuple[Term, Term]]:
    """Smallest subterm pairs where ``a`` and ``b`` differ, descending through nodes of equal
    op, attrs, dims and arity (congruence); ``[(a, b)]`` when the roots differ in shape."""
    out: list[tuple[Term, Term]] = []
    seen: set[tuple[int, int]] = set()
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if x is y or (id(x), id(y)) in seen:
            continue
        seen.add((id(x), id(y)))
        if x.op is y.op and x.attrs == y.attrs and x.dims == y.dims and len(x.args) == len(y.args) \
                and x.op is not Op.INPUT:
            stack.extend(reversed(list(zip(x.args, y.args))))
        else:
            out.append((x, y))
    return out


def _congr_tree(a: Term, b: Term, leaf: dict[tuple[int, int], int], steps: ProofSteps,
                node: Callable[[Term], int]) -> int:
    """The congruence proof of ``a == b`` whose leaves are the steps in ``leaf``."""
    memo: dict[tuple[int, int], int | None] = {}
    order: list[tuple[Term, Term]] = []
    stack: list[tuple[Term, Term, bool]] = [(a, b, False)]
    while stack:
        x, y, done = stack.pop()
        k = (id(x), id(y))
        if k in memo:
            continue
        if x is y:
            memo[k] = None
            continue
        if k in leaf:
            memo[k] = leaf[k]
            continue
        if done:
            args = [memo[(id(c), id(d))] for c, d in zip(x.args, y.args)]
            memo[k] = steps.congr(node(x), node(y), args)
            order.append((x, y))
            continue
        stack.append((x, y, True))
        stack.extend((c, d, False) for c, d in zip(x.args, y.args))
    r = memo[(id(a), id(b))]
    return steps.refl(node(a)) if r is None else r


def _first_difference(a: Term, b: Term) -> str:
    pairs = _differing_pairs(a, b)
    if not pairs:
        return "(none)"
    x, y = pairs[0]
    return f"{x.op.name}{list(x.attrs)[:2]} vs {y.op.name}{list(y.attrs)[:2]}"


