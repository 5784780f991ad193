"""The ``smt`` phase: goals whose normal forms differ, discharged on their smallest differing
subterm pairs by exact rational identities (``cas``) and z3 (``proofs/smt_fallback.py``), then
put back together by congruence; the egglog oracle is consulted for the reason only
(``docs/cli.md`` step 5, ``docs/soundness.md``)."""

from __future__ import annotations

import time
from collections.abc import Callable

from proofs.certificate import ProofSteps
from proofs.phases.ledger import Budget, GoalResult, ProofLog, Work
from proofs.smt_fallback import Z3Fallback
from spec_lang.term import Binding, Op, Term

__all__ = ["smt_fallback", "differing_pairs", "first_difference", "ORACLE_BUDGET_S",
           "ORACLE_GOAL_S"]

ORACLE_BUDGET_S = 10.0     # egglog oracle, all goals together (advisory only)
ORACLE_GOAL_S = 5.0


def smt_fallback(work: Work, log: ProofLog, z3: Z3Fallback, budget: Budget, binding: Binding,
                 open_: list[GoalResult] | None = None) -> None:
    """Open goals with normal forms in ``work.nf`` (default: all of them): exact rational
    identities (cas) and z3 on the smallest differing subterm pairs of the two normal forms;
    then the egglog oracle, advisory only, for the reason of those still open.

    ``z3`` is the run's fallback (its ``reduced_used`` says whether a query ran below the real
    sizes, which the verdict's assumptions then state)."""
    if open_ is None:
        open_ = [g for g in work.goals if g.name in work.nf and g.status == "open"]
    pairs = {g.name: differing_pairs(*work.nf[g.name][:2]) for g in open_}
    _discharge(open_, pairs, work, log, z3, budget)
    # congruence may split a pair wrongly (MAXIMUM(x, y) vs MAXIMUM(y, x)): retry the
    # goals still open on their two whole normal forms
    retry = [g for g in open_ if g.status == "open" and len(pairs[g.name]) > 1
             or (pairs[g.name] and pairs[g.name][0] != work.nf[g.name][:2])]
    if retry and not budget.timed_out():
        _discharge([g for g in retry if g.status == "open"],
                   {g.name: [work.nf[g.name][:2]] for g in retry}, work, log, z3, budget)
    _consult_oracle([g for g in open_ if g.status == "open"], work, binding, budget)


def _discharge(open_: list[GoalResult], pairs: dict[str, list[tuple[Term, Term]]], work: Work,
               log: ProofLog, z3: Z3Fallback, budget: Budget) -> None:
    from proofs.cas import cas_identity
    from rewriting.signs import CONTEXT_FREE

    steps, node = log.steps, log.node
    keep = []
    for g in open_:  # both sides of a cas / smt step must be defined on the spec's domain
        sg = work.goal_signs.get(id(g), CONTEXT_FREE)
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
            if (id(e), id(a)) not in leaf and not budget.timed_out() and \
                    cas_identity(log.table, node(e), node(a)) is None:
                leaf[(id(e), id(a))] = steps.cas(node(e), node(a))
    queries, failed_at = [], {}
    for g in open_:  # 3b. z3 on the rest, at the sizes docs/soundness.md allows
        rest = [(e, a) for e, a in pairs[g.name] if (id(e), id(a)) not in leaf]
        for e, a in rest:
            if e.op is Op.CONST and a.op is Op.CONST:  # cas found them unequal: z3 cannot help
                failed_at[g.name] = f"constants differ: {e.attrs[0]} vs {a.attrs[0]}"
                break
            b, why = z3.binding(e, a)
            if b is None:
                failed_at[g.name] = why
                break
        else:
            queries.extend((g.name, e, a) for e, a in rest)
    answers = z3.solve(queries)
    used_smt: set[str] = set()
    for g in open_:
        nf_e, nf_a, se, sa = work.nf[g.name]
        failed = failed_at.get(g.name)
        for e, a in pairs[g.name]:
            if failed or (id(e), id(a)) in leaf:
                continue
            ans = answers.get((id(e), id(a)))
            if ans is None or ans[0] != "unsat":
                failed = (f"z3 on {e.op.name} vs {a.op.name}: "
                          f"{'timeout' if ans is None else ans[0]}")
                break
            leaf[(id(e), id(a))] = z3.step(steps, e, a, ans[1])
            used_smt.add(g.name)
        if failed:
            if failed not in g.reason:
                g.reason += "; " + failed
            continue
        mid = _congr_tree(nf_e, nf_a, leaf, steps, node)
        g.proof = steps.chain(node(g.expected), [se, mid, steps.sym(sa)])
        g.status, g.reason = "proved", ""
        g.method = "smt" if g.name in used_smt else "rewrite"


def _consult_oracle(goals: list[GoalResult], work: Work, binding: Binding,
                    budget: Budget) -> None:
    """egglog's verdict on goals still open (uncertified: it only explains the reason).
    Bounded: ORACLE_BUDGET_S in total, ORACLE_GOAL_S per goal."""
    oracle = _egglog_oracle()
    if oracle is None:
        return
    until = time.monotonic() + min(ORACLE_BUDGET_S, budget.left() / 4)
    for g in goals:
        left = until - time.monotonic()
        if left <= 0.5:
            break
        nf_e, nf_a, _, _ = work.nf[g.name]
        verdict = oracle(nf_e, nf_a, binding, min(ORACLE_GOAL_S, left))
        if verdict is True:
            g.reason += "; egglog finds them equal (uncertified, not accepted alone)"


def _egglog_oracle() -> Callable[..., bool | None] | None:
    try:
        from rewriting import decide  # type: ignore[attr-defined]
    except ImportError:
        return None

    def call(e: Term, a: Term, binding: Binding, timeout_s: float) -> bool | None:
        """``rewriting.egraph.Decision.equal``: True (equal) or None (not shown)."""
        try:
            return decide(e, a, binding, timeout_s).equal
        except Exception:  # noqa: BLE001 -- the oracle is advisory; its failure leaves the goal open
            return None
    return call


def differing_pairs(a: Term, b: Term) -> list[tuple[Term, Term]]:
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
            continue
        stack.append((x, y, True))
        stack.extend((c, d, False) for c, d in zip(x.args, y.args))
    r = memo[(id(a), id(b))]
    return steps.refl(node(a)) if r is None else r


def first_difference(a: Term, b: Term) -> str:
    """The ops (and first attributes) of the first differing subterm pair, for a reason."""
    pairs = differing_pairs(a, b)
    if not pairs:
        return "(none)"
    x, y = pairs[0]
    return f"{x.op.name}{list(x.attrs)[:2]} vs {y.op.name}{list(y.attrs)[:2]}"
