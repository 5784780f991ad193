"""The ``cut`` phase and its two ends: goals replaced by one lemma per layer class at the marked
layer boundaries (``proofs/cut.py``), premises that fail cut retried on their whole terms, and
the goals' proofs assembled from the lemma proofs (``docs/verifier-internals.md``, "Obligation
cutting")."""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from proofs.obligations import group_identical
from proofs.phases.ledger import Budget, GoalResult, PhaseClock, ProofLog, Work
from proofs.phases.normalisation import AssumedDenominators, normalise, normalise_assuming
from proofs.phases.refutation import Refuted, refute_goals
from proofs.phases.shapes import Shapes
from proofs.phases.smt import smt_fallback
from proofs.refute import Refutation, refute
from proofs.smt_fallback import Z3Fallback
from spec_lang.term import Binding, Op, Term, walk

if TYPE_CHECKING:
    from proofs.executor import ExecutorStats

__all__ = ["CutPlan", "CutOutcome", "Retried", "cut_goals", "retry_whole", "assemble_cuts",
           "CUT_ROUNDS", "LEMMA_REFUTE_MAX_EVAL"]

CUT_ROUNDS = 5             # cut / refute-lemmas rounds before giving cutting up
LEMMA_REFUTE_MAX_EVAL = 200_000_000  # evaluated elements (eval_cost) of the lemma search


@dataclass(frozen=True)
class CutPlan:
    """The cuts the goals are proved through.

    Attributes:
        cuts: the cut points (:class:`proofs.cut.Cut`).
        lemmas: goal name -> its lemma (:class:`proofs.cut.Obligation`).
        premises: cut name -> its premise (``E(s) == p``, cut below it or whole).
        reuse: lemma or premise name -> the representative of its renaming class.
    """

    cuts: list[Any]
    lemmas: dict[str, Any]
    premises: dict[str, Any]
    reuse: dict[str, str]

    def work(self) -> Work:
        """The open records of the lemmas and premises (the proof phases' obligations)."""
        out = []
        for o in list(self.lemmas.values()) + list(self.premises.values()):
            w = GoalResult.of(o)
            w.reuses = self.reuse.get(o.name)
            out.append(w)
        return Work.of(out)


@dataclass(frozen=True)
class CutOutcome:
    """What ``cut`` decided: ``plan`` (None: the goals are proved uncut) and ``refuted``, the
    whole-program refuter's result when a refuted lemma sent the program to it (None: it did
    not run)."""

    plan: CutPlan | None = None
    refuted: Refuted | None = None


def cut_goals(problem: Any, goals: list[GoalResult], shapes: Shapes, budget: Budget,
              clock: PhaseClock) -> CutOutcome:
    """Replace the goals by their cut lemmas and the premises of the cuts they use.

    The lemmas of representatives (one per renaming class) are refuted first; a refuted
    premise of the topmost backward cut with a constant ratio fixes the adjoint factor
    ``c``; otherwise a refuted lemma sends the whole program to the refuter (a real
    counterexample ends cutting: it is the outcome's ``refuted``), and the cuts whose premises
    failed are dropped (the goals whose own lemma failed are proved uncut). At most
    ``CUT_ROUNDS`` rounds."""
    from proofs.cut import CUT_PREFIX, build_cuts, cut_obligations, input_permutes

    pts = problem.cut_points
    if not pts or any(t.op is Op.INPUT and str(t.attrs[0]).startswith(CUT_PREFIX)
                      for t in walk([x for g in goals for x in (g.expected, g.actual)])):
        return CutOutcome()
    refuted: Refuted | None = None
    uncut, whole = set(), set()
    perms = input_permutes(problem.goals)
    factor, drop = _first_factor(pts, perms, problem, shapes)
    for _ in range(CUT_ROUNDS):
        cuts = build_cuts(pts, backward_factor=factor, drop=drop, permutes=perms)
        if not cuts or budget.timed_out():
            return CutOutcome(None, refuted)
        lemmas, premises = cut_obligations(problem.goals, cuts, uncut=uncut, whole=whole)
        obs = list(lemmas.values()) + list(premises.values())
        reuse = group_identical(obs)
        plan = CutPlan(cuts, lemmas, premises, reuse)
        reps = [o for o in obs if o.name not in reuse]
        budget.progress("cut", 0, len(reps))
        r = _refute_lemmas(reps, problem.binding, shapes)
        budget.progress("cut", len(reps), len(reps))
        bad = {o.name for o in r.mismatched}
        if factor == 1 and not bad and r.skipped:
            # too large to search: still find the adjoint factor on the topmost backward
            # premises, then let the proofs decide (a wrong cut leaves goals open)
            bad = {o.name for n, o in premises.items() if n.endswith(":adj")
                   and not any(u.endswith(":adj") for u in o.uses)}
            if not bad:
                return CutOutcome(plan, refuted)
        elif not bad:
            return CutOutcome(plan, refuted)
        # the topmost backward cuts: their lemma uses no other backward cut
        top = [premises[n] for n in premises if n.endswith(":adj") and
               premises[n].name in bad and not any(u.endswith(":adj")
                                                   for u in premises[n].uses)]
        if factor == 1 and top:
            f = _top_factor(top, problem, shapes)
            if f == 1:
                return CutOutcome(plan, refuted)   # factor 1 holds
            if f is not None:
                factor = f
                continue
            drop |= {c.name for c in cuts if c.kind == "backward"}
            continue
        if refuted is None:
            refuted = clock.run("refute", "goals", refute_goals, problem, goals, shapes,
                                budget.progress)
            if refuted.counterexample is not None:
                return CutOutcome(None, refuted)
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
    return CutOutcome(None, refuted)


def _top_factor(top: list[Any], problem: Any, shapes: Shapes) -> Fraction | None:
    """The factor of the topmost backward cuts' premises ``top`` (refuted at factor 1) at the
    real mesh (one small lemma each: the head and the loss): 1 when they hold there, the one
    ratio they show, or None (no single ratio: the backward cuts are dropped)."""
    from proofs.reduction import eval_cost

    rs = [refute([o], shapes.reduced, shapes.mesh, seeds=(0,))
          if eval_cost([o.expected, o.actual], shapes.reduced)
          <= LEMMA_REFUTE_MAX_EVAL else None for o in top]
    if all(x is not None and x.counterexample is None for x in rs):
        return Fraction(1)
    # too large at the real mesh: the monomial in the mesh sizes seen on reduced meshes
    # (proofs.refute.real_mesh_factor); the proofs confirm it or not
    ratios = {_ratio_of(x) if x is not None else _mesh_factor(o, problem.binding)
              for x, o in zip(rs, top)}
    return ratios.pop() if len(ratios) == 1 and None not in ratios else None


def _first_factor(pts: Any, perms: Any, problem: Any, shapes: Shapes
                  ) -> tuple[Fraction, set[str]]:
    """``(backward factor, cuts to drop)`` to start the rounds with, from the topmost backward
    cuts' premises alone (issue 14: a plan whose adjoint is scaled, by micro-batches or dp,
    otherwise costs a whole round of lemmas at factor 1 before the factor is known). The
    rounds still check the factor (a top premise refuted at factor 1 is looked at again);
    the factor only chooses the cuts, and every cut is proved or the goal stays open."""
    from proofs.cut import build_cuts, premise_obligations, premise_uses

    cuts = build_cuts(pts, permutes=perms)
    uses = premise_uses(cuts, [c.name for c in cuts if c.kind == "backward"])
    top = list(premise_obligations(cuts, [n for n, us in uses.items()
                                          if not any(u.endswith(":adj") for u in us)]).values())
    if not top:
        return Fraction(1), set()
    r = _refute_lemmas(top, problem.binding, shapes)
    bad = {o.name for o in r.mismatched} or ({o.name for o in top} if r.skipped else set())
    top = [o for o in top if o.name in bad]
    f = _top_factor(top, problem, shapes) if top else Fraction(1)
    if f is None:
        return Fraction(1), {c.name for c in cuts if c.kind == "backward"}
    return f, set()


def _refute_lemmas(obs: list[Any], binding: Binding, shapes: Shapes) -> Refutation:
    """One random draw over the lemmas, on a reduced mesh when the mesh can be cut
    (``docs/rank-symmetry.md``): only a filter for which cuts to keep, never a verdict."""
    from proofs.reduction import eval_cost, reduce_mesh
    from proofs.refute import refute_reduced_mesh

    roots = [t for o in obs for t in (o.expected, o.actual)]
    mr = reduce_mesh(roots, binding)
    cost = eval_cost(mr.roots, mr.binding) if mr.reduced else eval_cost(roots, shapes.reduced)
    if cost > LEMMA_REFUTE_MAX_EVAL:   # e.g. cp16 x tp8 keeps 256 reduced positions
        return Refutation([], None, {o.name: "too large to evaluate" for o in obs})
    if mr.reduced:
        r, _ = refute_reduced_mesh(obs, binding, seeds=(0,), mr=mr)
        if r is not None:
            return r
    return refute(obs, shapes.reduced, shapes.mesh, seeds=(0,))


@dataclass(frozen=True)
class Retried:
    """After :func:`retry_whole`: the obligations (``work``, the retried premises' records in
    place of the cut ones), the ``plan`` (those premises whole), the executor statistics of
    its normalisation (None: nothing was retried) and the assumed denominators."""

    work: Work
    plan: CutPlan
    stats: ExecutorStats | None
    assumed: AssumedDenominators | None


def retry_whole(work: Work, plan: CutPlan, binding: Binding, dens: Any, log: ProofLog,
                z3: Z3Fallback, budget: Budget, assumed: AssumedDenominators | None) -> Retried:
    """Premises still open after the proofs are proved again on their whole terms
    ``E(s) == p`` (no cut below them). A cut premise can be false while the whole one holds:
    a plan term that does not pass through the plan nodes of the cuts below it (a tied
    embedding's per-stage gradients did, before ``spec_lang/pipeline.py`` removed their
    stop-gradient marks: issue 14); the lemma search normally finds this, but it is skipped
    above its evaluation budget."""
    from proofs.cut import Obligation

    by_cut = {c.name: c for c in plan.cuts}

    def proved(w: GoalResult) -> bool:   # a reused lemma is proved when its source is
        return (work.by_name[w.reuses] if w.reuses is not None else w).status == "proved"

    todo = [n for n, o in plan.premises.items() if o.uses and not proved(work.by_name[o.name])]
    if not todo or budget.timed_out():
        return Retried(work, plan, None, assumed)
    premises = dict(plan.premises)
    new = []
    for n in todo:
        c = by_cut[n]
        ob = Obligation("premise:" + n, "premise:" + n, c.inst, c.plan, [], kind="premise",
                        layer=premises[n].layer)
        premises[n] = ob
        new.append(GoalResult(ob.name, ob.kind, ob.layer, "", "", ob.expected, ob.actual))
    # the retry shares the run's normal forms and signs (keyed by name and by record)
    retry = Work.of(new, nf=work.nf, goal_signs=work.goal_signs)
    stats = normalise(retry, binding, log, budget)
    smt_fallback(retry, log, z3, budget, binding)
    assumed = normalise_assuming(retry, binding, dens, log, z3, budget, assumed)
    merged = {**work.by_name, **retry.by_name}
    out = Work.of([merged[w.name] for w in work.goals], nf=work.nf, goal_signs=work.goal_signs)
    return Retried(out, replace(plan, premises=premises), stats, assumed)


def assemble_cuts(goals: list[GoalResult], work: Work, plan: CutPlan,
                  log: ProofLog) -> dict[str, int]:
    """Goal proofs from the lemma proofs: ``cut`` steps for premises (in dependency order) and
    goals (``goals``, the problem's records, updated); a lemma reused from its class's
    representative is cut with the representative's proof at its own cut points (a class cut,
    docs/certificate.md; issue 14 item 2), or renamed when it has no cut points or they do not
    correspond. Called once per run.

    Returns:
        the lemma counts of ``Report.lemma_counts``: obligations, by rewriting, by z3, reused,
        open, and the number of cuts.
    """
    steps, node = log.steps, log.node
    by_cut = {c.name: c for c in plan.cuts}
    by_var = {c.var.attrs[0]: c for c in plan.cuts}
    lemmas, premises = plan.lemmas, plan.premises
    done = work.by_name
    renamed: dict[str, int] = {}   # lemma name -> its rename step, made when first needed
    reused: dict[str, GoalResult] = {}   # lemma name -> the proved class lemma it reuses
    for w in work.goals:   # lemmas reused from a renaming class representative
        if w.reuses is not None and w.status == "open":
            src = done[w.reuses]
            if src.status == "proved":
                w.status, w.method = "proved", src.method
                w.reuses_lemma = True
                reused[w.name] = src
            else:
                w.reason = f"same lemma as {src.name}, which is open: {src.reason}"

    def proof_of(w: GoalResult) -> int:
        """The step proving lemma ``w`` as stated: its own proof, or a rename of its class's."""
        if w.name not in reused:
            return w.proof
        if w.name not in renamed:
            renamed[w.name] = steps.rename(node(w.expected), node(w.actual),
                                           reused[w.name].proof)
        return renamed[w.name]

    step: dict[str, int | None] = {}    # cut name -> step proving inst == plan, or None
    why: dict[str, str] = {}

    def cut_step(ob: Any, lhs: Term, rhs: Term, w: GoalResult) -> int | None:
        if w.status != "proved":
            return None
        if any(step.get(u) is None for u in ob.uses):
            return None
        if not ob.uses:
            return proof_of(w)
        at = {u: by_cut[u] for u in ob.uses}     # the cut point whose var / embed the lemma has
        src = reused.get(w.name)
        if src is not None:   # the class's lemma itself, at this instance's cut points
            mine = class_cut_points(w, src, ob.uses, by_cut, by_var)
            if mine is None:
                src = None
            else:
                at = mine
        items = [(node(by_cut[u].spec), node(by_cut[u].plan), node(at[u].var),
                  node(at[u].embed), step[u]) for u in ob.uses]
        return steps.cut(node(lhs), node(rhs), src.proof if src is not None else proof_of(w),
                         items)

    smt_below: dict[str, bool] = {}     # cut name -> an smt proof in its premise's closure
    for n in _premise_order(premises):
        ob, c, w = premises[n], by_cut[n], done[premises[n].name]
        # (a premise not ordered before n: a cycle of crossing marks, round 32 R32-1; n then
        # has no step, nor has anything that uses it, so its entry is never read for a proof)
        smt_below[n] = w.method == "smt" or any(smt_below.get(u, False) for u in ob.uses)
        step[n] = cut_step(ob, c.inst, c.plan, w)
        if step[n] is None:
            bad = [u for u in ob.uses if step.get(u) is None]
            why[n] = w.reason if w.status != "proved" else \
                f"premise {bad[0]}: {why.get(bad[0], 'not proved')}"
    for g in goals:
        ob = lemmas[g.name]
        w = done[ob.name]
        s = cut_step(ob, g.expected, g.actual, w)
        if s is None:
            bad = [u for u in ob.uses if step.get(u) is None]
            g.reason = w.reason if w.status != "proved" else \
                f"premise {bad[0]}: {why.get(bad[0], 'not proved')}"
            continue
        g.status, g.proof = "proved", s   # smt when the lemma or a premise below it is
        g.method = "smt" if w.method == "smt" or any(smt_below[u] for u in ob.uses) \
            else "rewrite"
        g.reuses_lemma = w.reuses_lemma
    rep = [w for w in done.values() if w.reuses is None]
    return {
        "obligations": len(done),
        "rewrite": sum(w.method == "rewrite" and w.status == "proved" for w in rep),
        "smt": sum(w.method == "smt" and w.status == "proved" for w in rep),
        "reused": sum(w.reuses is not None and w.status == "proved" for w in done.values()),
        "open": sum(w.status != "proved" for w in done.values()),
        "cuts": len(plan.cuts)}


def class_cut_points(w: Any, src: Any, uses: list[str], by_cut: dict[str, Any],
                     by_var: dict[str, Any]) -> dict[str, Any] | None:
    """For lemma ``w``, a bijective renaming of the inputs of its class's lemma ``src``: the
    class's cut point at each of ``w``'s cuts (its var is the one the renaming sends to the
    cut's var), so that one ``cut`` step instantiates ``src``'s proof at ``w``'s cut points
    (``docs/certificate.md``, cut steps; issue 14 item 2). None when a cut has no such point
    or the two embeds differ other than in their var (the caller then renames ``src``'s
    lemma to ``w``'s and cuts that)."""
    ren = input_renaming((src.expected, src.actual), (w.expected, w.actual))
    if ren is None:
        return None
    back = {b: a for a, b in ren.items()}
    out: dict[str, Any] = {}
    for u in uses:
        c = by_var.get(back.get(by_cut[u].var.attrs[0], ""))
        if c is None or input_renaming((c.embed,), (by_cut[u].embed,)) is None:
            return None
        out[u] = c
    return out


def input_renaming(a: tuple[Term, ...], b: tuple[Term, ...]) -> dict[str, str] | None:
    """The bijective renaming of INPUT names (same kind, domain and dims) mapping terms ``a``
    onto ``b`` node by node, or None when there is none."""
    ren: dict[str, str] = {}
    back: dict[str, str] = {}
    seen: set[tuple[int, int]] = set()
    stack = list(zip(a, b))
    while stack:
        x, y = stack.pop()
        if (x.uid, y.uid) in seen:
            continue
        seen.add((x.uid, y.uid))
        if x.op is not y.op or x.dims != y.dims or len(x.args) != len(y.args):
            return None
        if x.op is Op.INPUT:
            if x.attrs[1:] != y.attrs[1:]:
                return None
            if ren.setdefault(x.attrs[0], y.attrs[0]) != y.attrs[0] or \
                    back.setdefault(y.attrs[0], x.attrs[0]) != x.attrs[0]:
                return None
            continue
        if x.attrs != y.attrs or list(map(type, x.attrs)) != list(map(type, y.attrs)):
            return None     # (1 == True == Fraction(1): the checker compares types too)
        stack.extend(zip(x.args, y.args))
    return ren


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

