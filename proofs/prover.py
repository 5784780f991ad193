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
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from proofs.certificate import ProofSteps
from proofs.counterexample import Counterexample, schedule_context
from proofs.kernel import NodeTable, from_terms
from proofs.normal import NormaliseResult
from proofs.obligations import group_identical
from proofs.reduction import MESH_AXES, MeshReduction, eval_cost, reduce_binding, reduce_mesh
from proofs.refute import Refutation, asymmetry_note, refute, refute_reduced_mesh
from proofs.smt import SmtError, build_query, run_query
from spec_lang.term import Binding, Op, Term, varying_axes, walk

__all__ = ["prove", "Report", "GoalResult", "VERDICTS"]

VERDICTS = ("EQUIVALENT", "NOT EQUIVALENT", "UNKNOWN")
SMT_MAX_ELEMENTS = 20_000  # scalar terms (elements summed over subterms) per z3 query
SMT_QUERY_S = 20.0         # z3 time limit per query
ORACLE_BUDGET_S = 10.0     # egglog oracle, all goals together (advisory only)
ORACLE_GOAL_S = 5.0
CUT_ROUNDS = 5             # cut / refute-lemmas rounds before giving cutting up
LEMMA_REFUTE_MAX_EVAL = 200_000_000  # evaluated elements (eval_cost) of the lemma search
WHOLE_REFUTE_MAX_EVAL = 2_000_000_000  # ... of the whole-program search after cut proofs fail
CONFIRM_MAX_ELEMENTS = 1 << 16  # product of real sizes kept when confirming a refutation
CONFIRM_MAX_EVAL = 300_000_000  # evaluated elements (eval_cost) of a real-mesh confirmation
Progress = Callable[[str, int, int], None]


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
    smt_binding: Binding | None
    assumptions: tuple[str, ...]
    problem: Any = None
    table: NodeTable = field(default_factory=NodeTable)
    steps: ProofSteps = field(default_factory=ProofSteps)
    node_of: dict[int, int] = field(default_factory=dict)
    executor: dict[str, Any] = field(default_factory=dict)  # proofs.executor.ExecutorStats
    # obligation cutting: lemma obligations total / by rewriting / by z3 / reused / open, cuts
    lemma_counts: dict[str, int] = field(default_factory=dict)

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
          worker_memory_gb: float | None = None) -> Report:
    """Prove every goal of ``problem`` (a ``spec_lang.Problem``) or refute one.

    Args:
        problem: goals, binding, mesh and assumptions from ``spec_lang.load``.
        jobs: worker processes for normalising independent obligation groups and for the
            Z3 fallback (:mod:`proofs.executor`; small problems stay in-process).
        timeout_s: wall-clock budget; goals still open when it runs out stay open.
        progress: called as ``progress(phase, done, total)``.
        executor: ``"local"`` (process pool) or ``"ray"`` (optional extra).
        worker_memory_gb: address-space limit per worker (default: RAM / jobs, <= 8 GB).

    Raises:
        proofs.executor.ExecutorUnavailable: ``executor`` cannot run here (ray not installed).
    """
    run = _Run(problem, jobs, timeout_s, progress or (lambda *_: None))
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
        self.smt_binding: Binding | None = None
        self.assumptions = list(getattr(problem, "assumptions", ()))
        self.mesh = {a: int(n) for a, n in problem.binding.items() if a in MESH_AXES}
        self.cutting = False          # goals are proved through cut lemmas (self.cut)
        self.refuted_whole = False    # the whole-program refuter has run
        self.cut_state: Any = None

    def phase(self, name: str, f: Callable[[], Any]) -> Any:
        t0 = time.monotonic()
        try:
            return f()
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.monotonic() - t0

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
        roots = [t for g in self.goals for t in (g.expected, g.actual)]
        self.reduced = reduce_binding(roots, self.p.binding)
        self.smt_binding = reduce_binding(roots, self.p.binding, base=2, cheap=1)
        # the refuter's search runs on a reduced mesh too (docs/rank-symmetry.md)
        self.mesh_red = reduce_mesh([t for g in self.p.goals for t in (g.expected, g.actual)],
                                    self.p.binding)
        # goals must be lowered (no REGION left): one walk over the shared DAG
        if any(t.op is Op.REGION for t in walk(roots)):
            for g in self.goals:
                if _unsupported(g.expected, g.actual):
                    g.reason = "a REGION node was not lowered (internal)"

    def refute(self) -> None:
        self.progress("refute", 0, len(self.goals))
        mr = getattr(self, "mesh_red", None)
        if mr is not None and mr.reduced:
            r = self._refute_on_reduced_mesh(mr)
        else:
            r = refute(self.p.goals, self.reduced, self.mesh)
            if r.counterexample is not None:
                r = self._confirm_at_real_sizes(r)
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
        for name, why in r.skipped.items():
            if name in self.by_name and self.by_name[name].status == "open":
                self.by_name[name].reason = why

    refute_notes: dict[str, str] = {}

    def _refute_on_reduced_mesh(self, mr: MeshReduction) -> Refutation:
        """Search on the reduced mesh, confirm at the real mesh sizes (docs/rank-symmetry.md).

        The goals are evaluated as the same program on a mesh cut to a few coordinates per
        axis (:func:`proofs.reduction.reduce_mesh`). Goals that diverge there, or cannot be
        evaluated there, are evaluated again at the real mesh sizes (reduced dims, as without
        mesh reduction) when that costs at most ``CONFIRM_MAX_EVAL`` elements; only that
        evaluation can refute, so the counterexample names real ranks and real factors. Over
        the budget the divergence is only a note on the goal (it stays open unless proved).
        """
        goals = list(self.p.goals)
        r0, _ = refute_reduced_mesh(goals, self.p.binding, mr=mr)
        assert r0 is not None
        names = {g.name for g in r0.mismatched} | {n for n in r0.skipped if n != "*"}
        if not names and "*" not in r0.skipped:
            return r0
        sub = goals if "*" in r0.skipped else [g for g in goals if g.name in names]
        cost = eval_cost([t for g in sub for t in (g.expected, g.actual)], self.reduced)
        if cost <= CONFIRM_MAX_EVAL:
            r = refute(sub, self.reduced, self.mesh)
            if r.counterexample is not None:
                r = self._confirm_at_real_sizes(r)
            return r
        too = (f"the real mesh sizes are too large to confirm by evaluation ({cost:.2g} > "
               f"{CONFIRM_MAX_EVAL:.2g} elements), so it is not reported as a counterexample")
        cx = r0.counterexample
        self.refute_notes = {}
        for g in r0.mismatched:
            what = ""
            if cx is not None and g.name == cx.goal:
                rank = mr.real_rank(cx.rank)
                what = (" (first at real rank ("
                        + ",".join(f"{a}={v}" for a, v in rank.items()) + "), plan "
                        + cx.ratio_text + ")")
            self.refute_notes[g.name] = (f"refuter: values differ on the reduced mesh "
                                         f"{mr.describe()}{what}; {too}")
        return Refutation([], None, {})

    def _confirm_at_real_sizes(self, r: Any) -> Any:
        """Re-run a refutation with dims kept at their real sizes where a constant may encode them.

        Shape reduction is exact only for programs that are generic in their dim sizes. A plan
        that writes a size as a literal (``1/16`` for ``1/|H|`` with H = 16) is equal to the spec
        at the real sizes but not at reduced ones, so a reduced-size mismatch is confirmed at the
        real size of every dim such a constant may stand for (its value, inverse, square or
        inverse square equals the dim's real size, or a product of two real sizes). If that is
        too large to evaluate, the mismatch is not reported as a counterexample: the goals stay
        open with the reason, and the verdict cannot be NOT EQUIVALENT on it.
        """
        g = next(x for x in self.p.goals if x.name == r.counterexample.goal)
        suspects = size_constant_suspects([g.expected, g.actual], self.p.binding, self.reduced)
        if not suspects:
            return r
        real = {d: self.p.binding[d] for d in suspects}
        cost = 1
        for n in real.values():
            cost *= n
        if cost > CONFIRM_MAX_ELEMENTS:
            why = (f"differs at reduced sizes only; constants in the plan may encode the real "
                   f"size of {', '.join(sorted(real))}, too large to confirm by evaluation")
            return Refutation([], None, {**r.skipped, r.counterexample.goal: why})
        names = {x.name for x in r.mismatched}   # only the diverging goals need confirming
        again = refute([x for x in self.p.goals if x.name in names],
                       self.reduced.replace(**real), self.mesh)
        if again.counterexample is None:
            why = (f"differs at reduced sizes but not with {', '.join(sorted(real))} at real size: "
                   f"a constant in the program encodes a size")
            return Refutation([], None, {**again.skipped, g.name: why})
        return again

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
    def smt_fallback(self) -> None:
        """Open goals: exact rational identities (cas) and z3 on the smallest differing subterm
        pairs of the two normal forms; then the egglog oracle, advisory only, for the reason."""

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

        leaf: dict[tuple[int, int], int] = {}
        for g in open_:  # 3a. rational identities, replayed by the checker with sympy
            for e, a in pairs[g.name]:
                if (id(e), id(a)) not in leaf and not self.timed_out() and \
                        cas_identity(self.table, self.node(e), self.node(a)) is None:
                    leaf[(id(e), id(a))] = self.steps.cas(self.node(e), self.node(a))
        queries = []
        cost = _SmtCost(self.smt_binding)
        too_big: dict[str, str] = {}
        for g in open_:  # 3b. z3 on the rest, if small enough
            rest = [(e, a) for e, a in pairs[g.name] if (id(e), id(a)) not in leaf]
            for e, a in rest:
                if cost(e) + cost(a) > SMT_MAX_ELEMENTS:
                    too_big[g.name] = (f"{e.op.name} vs {a.op.name} is too large for the z3 "
                                       f"fallback (> {SMT_MAX_ELEMENTS} scalar terms at reduced "
                                       f"sizes)")
                    break
            else:
                queries.extend((g.name, e, a) for e, a in rest)
        answers = self._solve(queries)
        used_smt: set[str] = set()
        for g in open_:
            nf_e, nf_a, se, sa = self.nf[g.name]
            failed = too_big.get(g.name)
            for e, a in pairs[g.name]:
                if failed or (id(e), id(a)) in leaf:
                    continue
                ans = answers.get((id(e), id(a)))
                if ans is None or ans[0] != "unsat":
                    failed = (f"z3 on {e.op.name} vs {a.op.name}: "
                              f"{'timeout' if ans is None else ans[0]}")
                    break
                leaf[(id(e), id(a))] = self.steps.smt(
                    self.node(e), self.node(a), dict(self.smt_binding), ans[1], "unsat",
                    f"z3 {_z3_version()}")
                used_smt.add(g.name)
            if failed:
                if failed not in g.reason:
                    g.reason += "; " + failed
                continue
            mid = _congr_tree(nf_e, nf_a, leaf, self.steps, self.node)
            g.proof = self.steps.chain(self.node(g.expected), [se, mid, self.steps.sym(sa)])
            g.status, g.reason = "proved", ""
            g.method = "smt" if g.name in used_smt else "rewrite"
        smt_note = ("smt steps prove equality at the reduced dim sizes of their binding (real "
                    "mesh sizes); shape reduction takes this to the real sizes")
        if used_smt and smt_note not in self.assumptions:
            self.assumptions.append(smt_note)
        cas_note = ("cas steps: the denominators of the rational identities are non-zero where "
                    "the spec is defined")
        if any(s["kind"] == "cas" for s in self.steps.steps) and cas_note not in self.assumptions:
            self.assumptions.append(cas_note)

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

    def _solve(self, queries: list[tuple[str, Term, Term]]) -> dict[tuple[int, int], tuple[str, str]]:
        """Run the Z3 queries (in a pool when jobs > 1); ``(id(e), id(a)) -> (answer, smt2)``."""
        out: dict[tuple[int, int], tuple[str, str]] = {}
        todo = []
        for name, e, a in queries:
            if (id(e), id(a)) in out or self.timed_out():
                continue
            try:
                q = build_query(self.table, self.node(e), self.node(a), self.smt_binding,
                                max_elements=2 * SMT_MAX_ELEMENTS)
            except SmtError as err:
                out[(id(e), id(a))] = (f"not encodable: {err}", "")
                continue
            todo.append((name, e, a, q))
            out[(id(e), id(a))] = ("pending", q.smt2)
        self.progress("smt", 0, len(todo))
        if self.jobs > 1 and len(todo) > 1:
            from proofs.executor import default_worker_memory_gb, limit_memory

            gb = self.worker_memory_gb or default_worker_memory_gb(self.jobs)
            with ProcessPoolExecutor(self.jobs, initializer=limit_memory,
                                     initargs=(int(gb * 2**30), False)) as ex:
                futs = [ex.submit(_solve_smt2, q.smt2, min(SMT_QUERY_S, self._left()))
                        for *_, q in todo]
                for k, ((_, e, a, q), f) in enumerate(zip(todo, futs)):
                    try:
                        ans = f.result()
                    except Exception as err:  # noqa: BLE001 -- a dead worker leaves it open
                        ans = f"worker failed: {type(err).__name__} (memory limit {gb:g} GB?)"
                    out[(id(e), id(a))] = (ans, q.smt2)
                    self.progress("smt", k + 1, len(todo))
        else:
            for k, (_, e, a, q) in enumerate(todo):
                if self.timed_out():
                    out[(id(e), id(a))] = ("timeout", q.smt2)
                    continue
                out[(id(e), id(a))] = (run_query(q, min(SMT_QUERY_S, self._left())), q.smt2)
                self.progress("smt", k + 1, len(todo))
        return out

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
                    g.reason = f"same obligation as {src.name}, which is open: {src.reason}"
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
                      smt_binding=self.smt_binding, assumptions=tuple(self.assumptions),
                      problem=self.p, table=self.table, steps=self.steps, node_of=self.node_of,
                      lemma_counts=dict(getattr(self, "lemma_counts", {})))


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


def _solve_smt2(smt2: str, timeout_s: float) -> str:
    """Worker: solve an SMT-LIB2 text (the main process regenerates and records it)."""
    import z3

    s = z3.Solver()
    s.set("timeout", max(1, int(timeout_s * 1000)))
    s.from_string(smt2)
    r = s.check()
    if r == z3.unsat:
        return "unsat"
    if r == z3.sat:
        return "sat"
    return f"unknown: {s.reason_unknown()}"


def _z3_version() -> str:
    import z3

    return z3.get_version_string()


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


def size_constant_suspects(roots: Sequence[Term], real: Binding, reduced: Binding) -> set[str]:
    """Dims reduced for refutation whose real size a constant below ``roots`` may encode.

    A constant ``c`` is suspect for dim ``d`` when ``|c|``, ``1/|c|``, ``c**2`` or ``1/c**2``
    equals the real size of ``d`` (or of ``d`` times another reduced dim).
    """
    from fractions import Fraction

    import sympy

    dims = [d for d in real if d not in MESH_AXES and d in reduced and reduced[d] != real[d]]
    if not dims:
        return set()
    sizes: dict[Fraction, set[str]] = {}
    for i, d in enumerate(dims):
        sizes.setdefault(Fraction(real[d]), set()).add(d)
        for e in dims[i + 1:]:
            sizes.setdefault(Fraction(real[d] * real[e]), set()).update((d, e))
    out: set[str] = set()
    for t in walk(list(roots)):
        if t.op is not Op.CONST:
            continue
        v = sympy.nsimplify(t.attrs[0]) if not isinstance(t.attrs[0], Fraction) else t.attrs[0]
        try:
            c = abs(sympy.Rational(v) if isinstance(v, Fraction) else v)
            cands = (c, 1 / c, c**2, 1 / c**2) if c != 0 else ()
        except (TypeError, ZeroDivisionError):
            continue
        for x in cands:
            x = sympy.nsimplify(x)
            if isinstance(x, sympy.Rational) and x.q == 1:
                out |= sizes.get(Fraction(int(x.p)), set())
    return out


def _unsupported(*roots: Term) -> str:
    for t in walk(list(roots)):
        if t.op is Op.REGION:
            return "a REGION node was not lowered (internal)"
    return ""


class _SmtCost:
    """An upper bound on the scalar terms of a term's encoding: elements of every node (all
    ranks) summed over the term as a tree, capped (memoised: linear in the shared DAG)."""

    def __init__(self, binding: Binding):
        self.b = binding
        self.memo: dict[int, int] = {}
        self.keep: list[Term] = []

    def own(self, t: Term) -> int:
        n = 1
        for d in t.dims:
            n *= max(1, self.b.local_size(d)) if d.name in self.b else 1
        for a in varying_axes(t):
            n *= self.b[a] if a in self.b else 1
        return n

    def __call__(self, root: Term) -> int:
        cap = SMT_MAX_ELEMENTS + 1
        if id(root) in self.memo:
            return self.memo[id(root)]
        stack: list[tuple[Term, bool]] = [(root, False)]
        while stack:  # post-order, not descending into memoised nodes
            t, done = stack.pop()
            if id(t) in self.memo:
                continue
            if not done:
                stack.append((t, True))
                stack.extend((c, False) for c in t.args if id(c) not in self.memo)
                continue
            try:
                own = self.own(t)
            except (KeyError, ValueError):
                own = cap
            self.memo[id(t)] = min(cap, own + sum(self.memo[id(c)] for c in t.args))
            self.keep.append(t)
        return self.memo[id(root)]


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


