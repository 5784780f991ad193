"""The egglog decision oracle for goals the normaliser leaves open.

``decide(lhs, rhs, binding, timeout_s) -> Decision``. egglog-Python cannot emit proofs (DESIGN 7),
so egglog is only the *e-graph*: union-find with congruence closure over the goal's terms.
The rules are ours (same matchers, same guards, evaluated in Python: "guards as pre-computed
facts"), so the oracle can never use a law the certificate checker does not know:

1. normalise both sides (certified); equal normal forms decide at once; normal forms whose
   differing subterm pairs (under a common skeleton) are all exact rational identities
   (``cas.py``) decide too (a replayable ``cas`` step per pair, plus congruence);
2. lower every node of both normal forms into egglog, each bound once to ``(Ref id)``
   (``let``-style sharing: an unshared tree would blow up, DESIGN 7):
   ``(union (Ref i) (N key (Cons (Ref c1) (Cons (Ref c2) (Nil)))))`` where ``key`` stands for
   the node's op, attrs and dims;
3. explore: at every node, apply *every* rule that matches (not only the normaliser's first
   choice) and every exploration rule (``explore.py``: distributivity, nested contractions,
   pulling a sum out of a contraction), normalise the result and ``union`` it with the node;
   new nodes are explored in turn, breadth first, within the node and time budgets;
4. egglog rebuilds (congruence: parents of merged children merge), and ``check (= lhs rhs)``.

``equal`` is ``True`` when egglog proved the two sides equal, ``None`` when the budget ran out or
nothing more applies. A ``True`` here is *uncertified*: the prover reports it as such (verdict
UNKNOWN) unless the normaliser certifies it; ``Decision.edges`` lists the rule instances whose
unions connected the two sides (each one a replayable rule step) and ``representative`` is the
term egglog extracts for the goal's class, for the normaliser to certify towards.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from spec_lang.term import Binding, Op, Term, TermError, term

from rewriting.build import _missing, encode_attr
from rewriting.cas import cas_equal
from rewriting.explore import EXPLORE
from rewriting.normalise import Normaliser
from rewriting.rule import RULES, Rule, Subst

__all__ = ["Decision", "decide", "EgraphError"]

_SCHEMA = "(datatype* (T (N i64 L) (Ref i64 :cost 1000000)) (L (Nil) (Cons T L)))"
_CHUNK = 100  # commands per egglog call: one huge program costs quadratic time and memory


class EgraphError(RuntimeError):
    """egglog failed (not a verdict: the goal stays open)."""


@dataclass
class Decision:
    """The oracle's answer (see the module docstring)."""

    equal: bool | None
    reason: str
    representative: Term | None = None
    edges: list[tuple[Term, str, Subst, Term]] = field(default_factory=list)
    nodes: int = 0
    seconds: float = 0.0
    cas_pairs: list[tuple[Term, Term]] = field(default_factory=list)
    """With a ``cas`` reason: the differing subterm pairs of the two normal forms, each an exact
    rational identity (``rewriting.cas.cas_equal``); the goal follows by congruence."""
    chain: list[tuple[Term, str, Subst, Term, bool]] | None = None
    """When found: a path ``nf(lhs) = ... = nf(rhs)`` of root-level edges ``(t, rule, subst,
    nf_of_rhs, forward)``, each certifiable as the rule step ``t -> rule.rhs(subst)`` followed by
    the normaliser's record of that rhs (``forward=False``: use the edge symmetrically). It is
    ``None`` when the e-graph needed congruence below the roots (then the equality stays
    uncertified)."""

    def __bool__(self) -> bool:
        return self.equal is True


class _Lowering:
    """Terms -> egglog commands, one ``(union (Ref i) (N key children))`` per distinct node."""

    def __init__(self) -> None:
        import egglog.bindings as eb

        self.eg = eb.EGraph()
        self._run(_SCHEMA)
        self.ids: dict[Term, int] = {}
        self.terms: list[Term] = []
        self.keys: dict[tuple, int] = {}
        self.key_info: list[tuple] = []
        self.pending: list[str] = []

    def _run(self, text: str) -> list[Any]:
        return self.eg.run_program(*self.eg.parse_program(text))

    def key(self, t: Term) -> int:
        k = (t.op, repr(encode_attr(t.attrs)), t.dims)
        i = self.keys.get(k)
        if i is None:
            i = self.keys[k] = len(self.key_info)
            self.key_info.append((t.op, t.attrs, t.dims))
        return i

    def add(self, t: Term) -> int:
        for n in _missing(t, lambda m: m in self.ids):
            i = self.ids[n] = len(self.terms)
            self.terms.append(n)
            lst = "(Nil)"
            for c in reversed(n.args):
                lst = f"(Cons (Ref {self.ids[c]}) {lst})"
            self.pending.append(f"(union (Ref {i}) (N {self.key(n)} {lst}))")
        return self.ids[t]

    def union(self, a: Term, c: Term) -> None:
        self.pending.append(f"(union (Ref {self.add(a)}) (Ref {self.add(c)}))")

    def flush(self) -> None:
        while self.pending:
            chunk, self.pending = self.pending[:_CHUNK], self.pending[_CHUNK:]
            self._run("\n".join(chunk))
        self._run("(run-schedule (saturate (run)))")

    def equal(self, a: Term, c: Term) -> bool:
        self.flush()
        try:
            self._run(f"(check (= (Ref {self.ids[a]}) (Ref {self.ids[c]})))")
        except Exception as err:  # noqa: BLE001 -- egglog raises EggSmolError on a failed check
            if "Check failed" in str(err):
                return False
            raise EgraphError(str(err)) from None
        return True

    def extract(self, t: Term) -> Term | None:
        """The term egglog extracts for ``t``'s class, rebuilt as a hash-consed Term."""
        self.flush()
        out = self._run(f"(extract (Ref {self.ids[t]}))")
        dag = next((o for o in out if type(o).__name__ == "ExtractBest"), None)
        if dag is None:
            return None
        try:
            return self._rebuild(dag.termdag, dag.term)
        except (AttributeError, IndexError, TypeError, KeyError, TermError):
            return None

    def _rebuild(self, termdag: Any, root: int) -> Term | None:
        memo: dict[int, Any] = {}

        def lit(i: int) -> int:
            v = termdag.get(i).value
            return int(getattr(v, "value", v))

        order: list[int] = []
        stack = [(root, False)]
        while stack:  # children first, no recursion
            i, post = stack.pop()
            if post:
                order.append(i)
                continue
            if i in memo:
                continue
            memo[i] = None
            stack.append((i, True))
            nd = termdag.get(i)
            if type(nd).__name__ == "TermApp" and nd.name in ("N", "Cons"):
                stack.extend((j, False) for j in nd.args)
        for i in order:
            nd = termdag.get(i)
            if type(nd).__name__ != "TermApp":
                continue
            if nd.name == "N":
                op, attrs, dims = self.key_info[lit(nd.args[0])]
                memo[i] = term(op, tuple(memo[nd.args[1]]), attrs, dims)
            elif nd.name == "Cons":
                memo[i] = [memo[nd.args[0]]] + memo[nd.args[1]]
            elif nd.name == "Nil":
                memo[i] = []
            elif nd.name == "Ref":
                memo[i] = self.terms[lit(nd.args[0])]
        return memo.get(root)


def _chain(a: Term, c: Term, edges: list[tuple[Term, str, Subst, Term]]
           ) -> list[tuple[Term, str, Subst, Term, bool]] | None:
    """Breadth-first path from ``a`` to ``c`` over the edges as an undirected graph."""
    adj: dict[Term, list[tuple[Term, tuple[Term, str, Subst, Term, bool]]]] = {}
    for t, name, s, u in edges:
        adj.setdefault(t, []).append((u, (t, name, s, u, True)))
        adj.setdefault(u, []).append((t, (t, name, s, u, False)))
    prev: dict[Term, tuple[Term, tuple] | None] = {a: None}
    queue = deque([a])
    while queue:
        x = queue.popleft()
        if x is c:
            path = []
            while prev[x] is not None:
                x, e = prev[x]
                path.append(e)
            return path[::-1]
        for y, e in adj.get(x, []):
            if y not in prev:
                prev[y] = (x, e)
                queue.append(y)
    return None


def differing_pairs(a: Term, c: Term, limit: int = 64) -> list[tuple[Term, Term]]:
    """Maximal differing subterm pairs under a common skeleton (same op, attrs, dims and arity
    all the way down): ``a = c`` follows from these pairs by congruence."""
    out: list[tuple[Term, Term]] = []
    stack = [(a, c)]
    while stack and len(out) <= limit:
        x, y = stack.pop()
        if x is y:
            continue
        if (x.op is y.op and x.attrs == y.attrs and x.dims == y.dims
                and len(x.args) == len(y.args) and x.op not in (Op.ADD, Op.MUL, Op.POW)):
            stack.extend((p, q) for p, q in zip(x.args, y.args) if p is not q)
        else:
            out.append((x, y))
    return out if len(out) <= limit else []


def _instances(t: Term, binding: Binding, rules: list[Rule]) -> list[tuple[Rule, Subst, Term]]:
    out = []
    for r in rules:
        if t.op not in r.ops:
            continue
        try:
            s = r.match(t, binding)
            if s is None:
                continue
            rhs = r.rhs(s, binding)
        except TermError:
            continue
        if rhs is not t:
            out.append((r, s, rhs))
    return out


def decide(lhs: Term, rhs: Term, binding: Binding, timeout_s: float = 10.0, *,
           max_nodes: int = 20_000, normaliser: Normaliser | None = None) -> Decision:
    """Is ``lhs == rhs`` (for every rank, over the reals)? See the module docstring.

    Returns:
        ``Decision(equal=True, ...)`` when proved (normal forms equal: ``reason`` says
        "normal forms"; otherwise uncertified, by e-graph), ``Decision(equal=None, ...)`` when
        not proved within the budget. Never ``False``: failing to prove is not a refutation.
    """
    t0 = time.monotonic()
    n = normaliser or Normaliser(binding)
    a, c = n.nf(lhs), n.nf(rhs)
    if a is c:
        return Decision(True, "normal forms are equal", a, seconds=time.monotonic() - t0)
    pairs = differing_pairs(a, c)
    if pairs and all(cas_equal(p, q).equal for p, q in pairs):
        return Decision(True, "normal forms equal up to exact rational identities (cas) of "
                        f"{len(pairs)} subterm pair(s)", a, seconds=time.monotonic() - t0,
                        cas_pairs=pairs)
    try:
        low = _Lowering()
    except ImportError as err:
        return Decision(None, f"egglog unavailable: {err}", seconds=time.monotonic() - t0)
    rules = list(RULES) + list(EXPLORE)
    low.add(a)
    low.add(c)
    queue: deque[Term] = deque(low.terms)
    done: set[Term] = set()
    edges: list[tuple[Term, str, Subst, Term]] = []
    reason = "saturated: no rule applies to any explored node"
    try:
        while queue:
            if time.monotonic() - t0 > timeout_s:
                reason = f"timeout after {timeout_s:g} s"
                break
            if len(low.terms) > max_nodes:
                reason = f"node budget {max_nodes} exhausted"
                break
            t = queue.popleft()
            if t in done:
                continue
            done.add(t)
            for r, s, alt in _instances(t, binding, rules):
                try:
                    alt_nf = n.nf(alt)
                except TermError:
                    continue
                before = len(low.terms)
                low.union(t, alt_nf)
                edges.append((t, r.name, s, alt_nf))
                queue.extend(low.terms[before:])
            if len(low.pending) > 20 * _CHUNK and low.equal(a, c):
                break
        equal = low.equal(a, c)
    except EgraphError as err:
        return Decision(None, f"egglog error: {err}", nodes=len(low.terms),
                        seconds=time.monotonic() - t0)
    secs = time.monotonic() - t0
    if equal:
        rep = low.extract(a)
        d = Decision(True, "e-graph (uncertified)", rep, edges, len(low.terms), secs)
        d.chain = _chain(a, c, edges)
        return d
    return Decision(None, reason, None, edges, len(low.terms), secs)
