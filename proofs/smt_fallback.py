"""The prover's z3 fallback: each open subterm pair at the sizes the shape-reduction theorem allows.

For a pair ``(e, a)`` the binding is :func:`proofs.admissible.proof_binding` of the pair's own
terms at the *real* binding (``docs/soundness.md``): an admissible size class runs at ``need``
offsets per unit, a fixed class (a position- or size-dependent op, a count, a non-polynomial op
on a summed value) at its real sizes. When that query is larger than ``SMT_MAX_ELEMENTS`` scalar
terms the pair is not attempted and the goal stays open with the reason in the user's words (the
dim, the op). The checker recomputes the same binding from the certificate's nodes and real
binding and regenerates the query (``proofs/checker.py``), so nothing here is trusted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from proofs.admissible import ASSUMPTION, AdmissibilityError, analyse, proof_binding
from proofs.kernel import NodeTable
from proofs.smt import SmtError, build_query, run_query
from spec_lang.term import Binding, Term, varying_axes

__all__ = ["SMT_MAX_ELEMENTS", "SMT_QUERY_S", "Z3Fallback", "ASSUMPTION"]

SMT_MAX_ELEMENTS = 20_000  # scalar terms (elements summed over subterms) per z3 query
SMT_QUERY_S = 20.0         # z3 time limit per query
Key = tuple[int, int]


class Z3Fallback:
    """Bindings, queries and answers for the subterm pairs of one prover run.

    Args:
        table, node: the run's certificate node table and ``term -> node id``.
        real: the real binding (dims and mesh).
        jobs, worker_memory_gb: z3 worker processes and their memory limit.
        left, timed_out: seconds left of the run's budget, and whether it ran out.
        progress: ``progress("smt", done, total)``.
    """

    def __init__(self, table: NodeTable, node: Callable[[Term], int], real: Binding, *,
                 jobs: int, worker_memory_gb: float | None, left: Callable[[], float],
                 timed_out: Callable[[], bool], progress: Callable[[str, int, int], None]):
        self.table, self.node, self.real = table, node, real
        self.jobs, self.worker_memory_gb = jobs, worker_memory_gb
        self.left, self.timed_out, self.progress = left, timed_out, progress
        self.bindings: dict[Key, dict[str, int]] = {}
        self.refused: dict[Key, str] = {}       # pairs not attempted -> why
        self._costs: dict[tuple[tuple[str, int], ...], _SmtCost] = {}
        self.reduced_used = False   # some step runs below the real sizes (needs ASSUMPTION)

    def binding(self, e: Term, a: Term) -> tuple[dict[str, int] | None, str]:
        """The pair's query binding, or ``None`` and why the pair is not attempted."""
        key = (id(e), id(a))
        if key in self.bindings:
            return self.bindings[key], ""
        if key in self.refused:
            return None, self.refused[key]
        try:
            adm = analyse(self.table.nodes, [self.node(e), self.node(a)], self.real)
        except AdmissibilityError as err:
            self.refused[key] = f"z3 on {e.op.name} vs {a.op.name}: {err}"
            return None, self.refused[key]
        b = proof_binding(adm, self.real)
        bk = tuple(sorted(b.items()))
        cost = self._costs.setdefault(bk, _SmtCost(Binding(b)))
        if cost(e) + cost(a) > SMT_MAX_ELEMENTS:
            fixed = adm.fixed_reasons()
            where = ("; ".join(fixed[:2]) + ", and at those sizes the query") if fixed else \
                "at the sizes the shape-reduction theorem allows, the query"
            self.refused[key] = (f"z3 on {e.op.name} vs {a.op.name} not attempted: {where} "
                                 f"exceeds {SMT_MAX_ELEMENTS} scalar terms")
            return None, self.refused[key]
        self.bindings[key] = b
        return b, ""

    def solve(self, queries: list[tuple[str, Term, Term]]) -> dict[Key, tuple[str, str]]:
        """Run the queries (pairs planned by :meth:`binding`), in a pool when ``jobs > 1``;
        ``(id(e), id(a)) -> (answer, smt2)``."""
        out: dict[Key, tuple[str, str]] = {}
        todo = []
        for name, e, a in queries:
            key = (id(e), id(a))
            if key in out or self.timed_out():
                continue
            try:
                q = build_query(self.table, self.node(e), self.node(a), self.bindings[key],
                                max_elements=2 * SMT_MAX_ELEMENTS)
            except SmtError as err:
                out[key] = (f"not encodable: {err}", "")
                continue
            todo.append((key, q))
            out[key] = ("pending", q.smt2)
        self.progress("smt", 0, len(todo))
        if self.jobs > 1 and len(todo) > 1:
            import multiprocessing as mp

            from proofs.executor import START_METHOD, default_worker_memory_gb, limit_memory

            gb = self.worker_memory_gb or default_worker_memory_gb(self.jobs)
            # spawned, not forked: a forked worker would hold every descriptor of prove, the
            # self-check's stdin among them, past prove's death (R31b-1)
            with ProcessPoolExecutor(self.jobs, initializer=limit_memory,
                                     initargs=(int(gb * 2**30), False),
                                     mp_context=mp.get_context(START_METHOD)) as ex:
                futs = [ex.submit(solve_smt2, q.smt2, min(SMT_QUERY_S, self.left()))
                        for _, q in todo]
                for k, ((key, q), f) in enumerate(zip(todo, futs)):
                    try:
                        ans = f.result()
                    except Exception as err:  # noqa: BLE001 -- a dead worker leaves it open
                        ans = f"worker failed: {type(err).__name__} (memory limit {gb:g} GB?)"
                    out[key] = (ans, q.smt2)
                    self.progress("smt", k + 1, len(todo))
        else:
            for k, (key, q) in enumerate(todo):
                if self.timed_out():
                    out[key] = ("timeout", q.smt2)
                    continue
                out[key] = (run_query(q, min(SMT_QUERY_S, self.left())), q.smt2)
                self.progress("smt", k + 1, len(todo))
        return out

    def step(self, steps: Any, e: Term, a: Term, smt2: str) -> int:
        """Record the smt step of a proved pair (its binding is the one it was solved at)."""
        b = self.bindings[(id(e), id(a))]
        if any(b[k] != self.real[k] for k in b):
            self.reduced_used = True
        return steps.smt(self.node(e), self.node(a), dict(b), smt2, "unsat", f"z3 {z3_version()}")


def solve_smt2(smt2: str, timeout_s: float) -> str:
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


def z3_version() -> str:
    import z3

    return z3.get_version_string()


class _SmtCost:
    """An upper bound on the scalar terms of a term's encoding: elements of every node (all
    ranks) summed over the term as a tree, capped (memoised: linear in the shared DAG)."""

    def __init__(self, binding: Mapping[str, int]):
        self.b = binding if isinstance(binding, Binding) else Binding(dict(binding))
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
