"""Where an open goal's two sides stop matching, in the user's files (issue 12 item 2).

An UNKNOWN goal ``expected == actual`` is two terms: the spec's value (through the output's
placement) and the plan's per-rank value. :func:`first_differences` walks both top-down in
parallel and returns, for each open goal, the first pair of nodes whose operations differ --
the spec node's ``file:line`` and the plan node's, with the two operations in words ("the spec
has a sum over V; the plan has a max over V"). It is for messages only: no verdict, proof or
certificate reads it, and it never raises (a failure gives ``None``, and ``prove`` prints the
site that produces the goal, as before).

What the walk looks through (what a plan adds without changing the structure of the value):

* movement and communication: ``SHARD``, ``PART``, ``CHUNK``, ``RENAME``, ``PERMUTE``,
  ``ALL_REDUCE``, ``ALL_GATHER``, ``REDUCE_SCATTER``, ``BROADCAST``, ``ALL_TO_ALL``, ``CAST``,
  ``STOP_GRAD`` (a local block of the spec's value, reduced or gathered);
* scale factors: the factors of a product without dims built from constants and sizes only
  (``1/dp``, ``1/K``, exact constants, ``1 / |dp|``);
* micro-batch accumulation and concatenation: a sum or concatenation of pieces of one shape
  (``f(mb0) + f(mb1)`` against ``f(batch)``).

Each node gets a *shape signature* (its operation, attributes that carry meaning, and its
children's signatures; commutative operands as a multiset; the looked-through nodes take their
operand's signature), memoised per node, so the cost is linear in the terms (flattening nested
sums and products copies operand lists, quadratic in a nesting depth -- 126 for the 405B's
residual stream -- up to :data:`FLAT_BUDGET` copies per report, then linear). Descending, the
children of two nodes with one operation are paired by signature (multiset for ``ADD``,
``MUL``, ``EINSUM``, ``MAXIMUM``; by position otherwise); the walk follows the first pair that
does not match and stops where the operations (or their attributes, or their arity) differ.
On the plans the prover proves (``examples/llama31_405b.py``: 4549 goals, 1.5 s; the debug
Megatron 3-D and GPT-2 plans) no goal has a structural difference, so one named on an UNKNOWN
plan is the plan's own spelling. When the signatures agree at the top (the two sides have one structure: a denominator, a
dropout renaming, a size fact is what is open), there is no structural difference and ``None``
is returned.

Sites: a node's ``file:line`` is :func:`spec_lang.tensor.site_of` (``prove`` records the traced
sites, ``proofs/problem_data.py``); a node without one (built by autodiff) takes the nearest
descendant's site within :data:`NEAR` nodes, else the nearest ancestor's on the walked path.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from spec_lang.term import Op, Term

__all__ = ["Difference", "Matcher", "first_differences", "NEAR", "FLAT_BUDGET"]

NEAR = 64          # descendants searched for a site when a node has none
# operands copied while flattening nested sums and products, over one report: beyond it nested
# sums are left nested (the signatures stay sound, only less normalised), so that a sum nested
# n deep costs O(n), not O(n^2) (adversarial finding R8-7: 8000 levels took 110 s)
FLAT_BUDGET = 100_000
_MAX_DEPTH = 1_000_000

_THROUGH = frozenset({Op.SHARD, Op.PART, Op.CHUNK, Op.RENAME, Op.PERMUTE, Op.ALL_REDUCE,
                      Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.BROADCAST, Op.ALL_TO_ALL, Op.CAST,
                      Op.STOP_GRAD})
_SCALAR = frozenset({Op.CONST, Op.DIM_SIZE, Op.AXIS_SIZE, Op.RANK_CONST})
_UNORDERED = frozenset({Op.ADD, Op.MUL, Op.EINSUM, Op.MAXIMUM})


@dataclass(frozen=True)
class Difference:
    """The first place the two sides of a goal stop matching.

    Attributes:
        spec_site: ``file:line`` of the spec's node (``""`` when no site is known).
        plan_site: ``file:line`` of the plan's node (``""`` when no site is known).
        spec_has: the spec's operation there, in words ("a sum over V").
        plan_has: the plan's operation there, in words ("a max over V").
    """

    spec_site: str
    plan_site: str
    spec_has: str
    plan_has: str

    @property
    def words(self) -> str:
        """``the spec has ...; the plan has ...``."""
        return f"the spec has {self.spec_has}; the plan has {self.plan_has}"

    def to_json(self) -> dict[str, Any]:
        return {"spec_site": self.spec_site or None, "plan_site": self.plan_site or None,
                "difference": self.words}


class Matcher:
    """Signatures memoised over every goal of one report (goals share most of their nodes)."""

    def __init__(self) -> None:
        self.memo: dict[int, int] = {}
        self.scalar: dict[int, bool] = {}      # id(node) -> a scale factor (no inputs, no dims)
        self.flat: dict[int, list[Term]] = {}   # id(ADD / MUL node) -> its flattened operands
        self.rest: tuple[list[Term], list[Term]] | None = None  # the last unmatched operands
        self.keep: list[Term] = []      # the memo's ids stay valid while the terms live
        self.work = 0                   # operands copied by flattening (see FLAT_BUDGET)

    # -- signatures ------------------------------------------------------------------------------
    def sig(self, root: Term) -> int:
        """The shape signature of ``root`` (iterative: terms are thousands of levels deep)."""
        memo = self.memo
        if id(root) in memo:
            return memo[id(root)]
        stack: list[tuple[Term, bool]] = [(root, False)]
        while stack:
            t, ready = stack.pop()
            if id(t) in memo:
                continue
            if not ready:
                stack.append((t, True))
                stack.extend((c, False) for c in t.args if id(c) not in memo)
                continue
            self.keep.append(t)
            self.scalar[id(t)] = t.op in _SCALAR or (
                not t.dims and bool(t.args) and all(self.scalar[id(c)] for c in t.args))
            memo[id(t)] = self._sig_of(t, [memo[id(c)] for c in t.args])
        return memo[id(root)]

    def _is_scalar(self, t: Term) -> bool:
        """A scale factor: no dims, built from constants and sizes only (``1/dp``, ``1/K``)."""
        if id(t) not in self.scalar:
            self.sig(t)
        return self.scalar[id(t)]

    def _sig_of(self, t: Term, cs: list[int]) -> int:
        op = t.op
        if op in _THROUGH:
            return cs[0]
        if op is Op.INPUT:
            return hash(("INPUT", str(t.attrs[0])))
        if op is Op.CONST:
            return hash(("CONST", str(t.attrs[0])))
        if op in _SCALAR or self.scalar[id(t)]:
            return hash(("SCALAR",))
        if op is Op.MUL:
            rest = [c for c, a in zip(cs, t.args) if not self._is_scalar(a)]
            if len(rest) == 1:
                return rest[0]
        if op in (Op.ADD, Op.CONCAT) and cs and len(set(cs)) == 1:
            return cs[0]         # micro-batch accumulation, pieces put back together
        if op in (Op.ADD, Op.MUL):  # n-ary: nested sums (products) flattened, operands a multiset
            return hash((op.name, tuple(sorted(self.sig(x) for x in self._operands(t)))))
        if op is Op.EINSUM:
            return hash(("EINSUM", _contracted(t), tuple(sorted(cs))))
        if op in _UNORDERED:
            return hash((op.name, tuple(sorted(cs))))
        return hash((op.name, _attr_key(t), tuple(cs)))

    # -- looking through -------------------------------------------------------------------------
    def look(self, t: Term) -> Term:
        """``t`` without what the walk looks through (same signature)."""
        for _ in range(_MAX_DEPTH):
            if t.op in _THROUGH:
                t = t.args[0]
            elif t.op is Op.MUL and sum(not self._is_scalar(a) for a in t.args) == 1:
                t = next(a for a in t.args if not self._is_scalar(a))
            elif t.op in (Op.ADD, Op.CONCAT) and t.args and \
                    len({self.sig(a) for a in t.args}) == 1:
                t = t.args[0]
            else:
                return t
        return t

    def _operands(self, t: Term) -> list[Term]:
        """``t``'s operands; for a sum or a product, those of nested sums (products) too, a
        product's scalar factors left out (memoised: linear in the terms)."""
        if t.op not in (Op.ADD, Op.MUL):
            return list(t.args)
        got = self.flat.get(id(t))
        if got is not None:
            return got
        out: list[Term] = []
        for a in t.args:
            if t.op is Op.MUL and self._is_scalar(a):
                continue
            if a.op is t.op and self.work < FLAT_BUDGET and \
                    not (a.op is Op.ADD and len({self.sig(x) for x in a.args}) == 1):
                sub = self._operands(a)         # memoised: sig() reached ``a`` first
                self.work += len(sub)
                out.extend(sub)
            else:
                out.append(a)
        self.flat[id(t)] = out
        self.keep.append(t)
        return out

    # -- the walk --------------------------------------------------------------------------------
    def first(self, expected: Term, actual: Term) -> Difference | None:
        """The first structural difference of ``expected`` (spec) and ``actual`` (plan), or
        None when they have one structure."""
        if self.sig(expected) == self.sig(actual):
            return None
        s, p = expected, actual
        above_s, above_p = _site(s), _site(p)
        for _ in range(_MAX_DEPTH):
            s, p = self.look(s), self.look(p)
            above_s, above_p = _site(s) or above_s, _site(p) or above_p
            self.rest = None
            nxt = self._differing_piece(s, p)
            nxt = nxt if nxt is not None else self._differing_operands(s, p)
            if nxt is None and self.rest is not None:   # operands differ: name the extra ones
                only_s, only_p = self.rest
                return Difference(_near_any(only_s) or _near(s) or above_s,
                                  _near_any(only_p) or _near(p) or above_p,
                                  _with(s, [self.look(x) for x in only_s]),
                                  _with(p, [self.look(x) for x in only_p]))
            if nxt is None:
                return Difference(_near(s) or above_s, _near(p) or above_p, words(s), words(p))
            s, p = nxt
        return None

    def _differing_piece(self, s: Term, p: Term) -> tuple[Term, Term] | None:
        """Micro-batch pieces on one side only (``f(mb0) + g(mb1)`` or a concatenation against
        ``f(batch)``): when some piece matches the other side, the first piece that does not."""
        for a, b, flip in ((s, p, False), (p, s, True)):
            if b.op in (Op.ADD, Op.CONCAT) and a.op is not b.op and \
                    any(self.sig(x) == self.sig(a) for x in b.args):
                odd = next((x for x in b.args if self.sig(x) != self.sig(a)), None)
                if odd is not None:
                    return (odd, a) if flip else (a, odd)
        return None

    def _differing_operands(self, s: Term, p: Term) -> tuple[Term, Term] | None:
        """The first pair of operands of ``s`` and ``p`` that do not match, or None when ``s``
        and ``p`` themselves differ (operation, attributes, arity) or nothing below differs."""
        if s.op is not p.op or _attr_key(s) != _attr_key(p) or \
                (s.op is Op.EINSUM and _contracted(s) != _contracted(p)):
            return None
        a, b = self._operands(s), self._operands(p)
        if s.op in _UNORDERED:
            left = Counter(self.sig(x) for x in b)
            only_s = []
            for x in a:
                k = self.sig(x)
                if left[k] > 0:
                    left[k] -= 1
                else:
                    only_s.append(x)
            only_p = []
            for y in b:
                k = self.sig(y)
                if left[k] > 0:
                    left[k] -= 1
                    only_p.append(y)
            if len(only_s) == 1 and len(only_p) == 1:
                return only_s[0], only_p[0]
            if only_s or only_p:
                self.rest = (only_s, only_p)
            return None
        if len(a) != len(b):
            return None
        for x, y in zip(a, b):
            if self.sig(x) != self.sig(y):
                return x, y
        return None


def _contracted(t: Term) -> tuple[str, ...]:
    out = {d.name for d in t.dims}
    return tuple(sorted({d.name for a in t.args for d in a.dims} - out))


def _attr_key(t: Term) -> tuple[str, ...]:
    """The attributes that carry meaning for the match (EINSUM's come from its dims)."""
    if t.op in (Op.EINSUM, Op.ADD, Op.MUL):
        return ()
    return tuple(str(a) for a in t.attrs)


def _site(t: Term) -> str:
    from spec_lang.tensor import site_of

    s = site_of(t)
    return "" if s.startswith("<") else s


def _near(t: Term) -> str:
    """``t``'s site, else the nearest descendant's (breadth first, at most :data:`NEAR`)."""
    q: deque[Term] = deque([t])
    seen: set[int] = set()
    while q and len(seen) < NEAR:
        x = q.popleft()
        if id(x) in seen:
            continue
        seen.add(id(x))
        s = _site(x)
        if s:
            return s
        q.extend(x.args)
    return ""


def _near_any(ts: list[Term]) -> str:
    """The first site among ``ts`` (computed operands before inputs, whose site is where they
    are declared)."""
    for t in sorted(ts, key=lambda x: x.op in _SCALAR or x.op is Op.INPUT):  # stable sort
        s = _near(t)
        if s:
            return s
    return ""


def _with(t: Term, only: list[Term]) -> str:
    """``a product with an exp and a sum`` (at most three operands named)."""
    def short(x: Term) -> str:
        return _NAMES[x.op] if x.op in (Op.ADD, Op.MUL) else words(x)

    head = "a sum" if t.op is Op.ADD else "a product" if t.op is Op.MUL else words(t)
    named = " and ".join(short(x) for x in only[:3]) + (" and more" if len(only) > 3 else "") \
        if only else "nothing the other side lacks"
    return f"{head} with {named}"


_NAMES = {Op.ADD: "a sum", Op.MUL: "a product", Op.NEG: "a negation", Op.RECIP: "a reciprocal",
          Op.EXP: "an exp", Op.LOG: "a log", Op.SQRT: "a square root",
          Op.RSQRT: "a reciprocal square root", Op.SIGMOID: "a sigmoid", Op.SILU: "a silu",
          Op.TANH: "a tanh", Op.GELU: "a gelu", Op.ERF: "an erf", Op.MAXIMUM: "a maximum",
          Op.WHERE: "a where (select)", Op.CAUSAL_MASK: "a causal mask",
          Op.ROPE_COS: "a RoPE cos table", Op.ROPE_SIN: "a RoPE sin table",
          Op.SHIFT: "a shift to the next token", Op.TOPK_MASK: "a top-k mask",
          Op.DIM_SIZE: "a dim size", Op.AXIS_SIZE: "a mesh axis size",
          Op.RANK_CONST: "a per-rank constant"}


def words(t: Term) -> str:
    """``t``'s operation in the user's terms ("a sum over V", "the input x", "a power -3/2")."""
    op = t.op
    if op is Op.EINSUM:
        over = _contracted(t)
        if len(t.args) == 1:
            return f"a sum over {', '.join(over)}" if over else "a copy"
        return f"a product summed over {', '.join(over)}" if over else \
            f"an elementwise product of {len(t.args)} factors"
    if op is Op.REDUCE_MAX:
        return f"a max over {', '.join(str(d) for d in t.attrs[0])}" \
            if isinstance(t.attrs[0], tuple) else f"a max over {t.attrs[0]}"
    if op is Op.INPUT:
        return f"the input {t.attrs[0]}"
    if op is Op.CONST:
        return f"the constant {t.attrs[0]}"
    if op is Op.POW:
        return f"a power {t.attrs[0]}"
    if op is Op.ONE_HOT:
        return f"a one_hot over {t.attrs[0]}"
    if op is Op.CONCAT:
        return f"a concatenation over {t.attrs[0]}"
    if op in (Op.ADD, Op.MUL):
        parts = [_NAMES[a.op] if a.op in (Op.ADD, Op.MUL) else words(a) for a in t.args[:3]]
        return f"{_NAMES[op]} of " + ", ".join(parts) + (", ..." if len(t.args) > 3 else "")
    return _NAMES.get(op, op.name.lower())


def first_differences(goals: Iterable[Any]) -> dict[str, Difference | None]:
    """Goal name -> the first structural difference of its ``expected`` and ``actual`` terms
    (None: none found, or the walk failed; it never raises). ``goals``: records with
    ``name``, ``expected``, ``actual`` (:class:`proofs.phases.ledger.GoalResult`)."""
    m = Matcher()
    out: dict[str, Difference | None] = {}
    for g in goals:
        try:
            out[g.name] = m.first(g.expected, g.actual)
        except Exception:  # noqa: BLE001 -- messages only: fall back to the producing site
            out[g.name] = None
    return out
