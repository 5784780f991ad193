"""Patterns, exact numbers and the environment of the checker's rule copies
(``proofs/checker_rules.py``).

A rule instance is rebuilt as *patterns* (op, attrs, children, optional dims) from a step's
substitution and matched against the kernel's node table (:func:`_match`); :class:`Env` gives a
rule the substitution, the nodes and the real sizes. Exact numbers follow the producer's
Fraction-or-sympy-number discipline (numbers are built, never parsed). Part of the trusted base
(``docs/trusted-base.md``); imports nothing from ``rewriting/``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from proofs.checker_signs import Signs
from proofs.kernel import NodeTable


class RuleMismatch(Exception):
    """A rule instance does not match the step's nodes, or its guard fails."""


# -- patterns -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class P:
    """A node pattern: op, attrs, children (node ids or patterns), optional exact dims.

    ``dims`` is a dict ``{name: shards}`` (set semantics) or a tuple of ``(name, shards)``
    (exact storage order)."""

    op: str
    attrs: tuple[Any, ...] = ()
    args: tuple[Any, ...] = ()
    dims: Any = None


def _attrs_equal(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, bool) != isinstance(y, bool) or isinstance(x, str) != isinstance(y, str):
            return False
        if isinstance(x, tuple) and isinstance(y, tuple):
            if not _attrs_equal(x, y):
                return False
        elif isinstance(x, tuple) != isinstance(y, tuple):
            return False
        elif not _num_eq(x, y):
            return False
    return True


# -- exact numbers (the producer's Fraction-or-sympy discipline) --------------------------------
def _sym(v: Any) -> Any:
    import sympy

    return sympy.Rational(v.numerator, v.denominator) if isinstance(v, Fraction) else v


def num(v: Any) -> Any:
    """Fraction for rationals, a sympy number otherwise."""
    if isinstance(v, bool):
        raise RuleMismatch(f"boolean constant {v!r}")
    if isinstance(v, Fraction):
        return v
    if isinstance(v, int):
        return Fraction(v)
    if type(v).__module__.startswith("sympy"):
        if not v.is_number:
            raise RuleMismatch(f"constant {v!r} is not a number")
        if v.is_Rational:
            return Fraction(int(v.p), int(v.q))
        return v
    raise RuleMismatch(f"constant {v!r} is not exact")


def _num_eq(x: Any, y: Any) -> bool:
    if x == y:
        return True
    if isinstance(x, (int, Fraction, str, type(None))) and isinstance(y, (int, Fraction, str,
                                                                         type(None))):
        return False
    try:
        import sympy

        return sympy.expand(_sym(num(x)) - _sym(num(y))) == 0
    except (RuleMismatch, TypeError, ValueError):
        return False


def num_mul(a: Any, b: Any) -> Any:
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return a * b
    import sympy

    return num(sympy.expand(_sym(a) * _sym(b)))


def num_add(a: Any, b: Any) -> Any:
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return a + b
    import sympy

    return num(sympy.expand(_sym(a) + _sym(b)))


def pow_is_real(c: Any, e: Fraction) -> bool:
    if e.denominator == 1 or e.denominator % 2 == 1:
        return c != 0 or e > 0
    return bool(_sym(c) > 0) if not isinstance(c, Fraction) else c > 0


def num_pow(c: Any, e: Fraction) -> Any:
    import sympy

    if isinstance(c, Fraction) and e.denominator == 1:
        return c ** int(e)
    base = _sym(c)
    if e.denominator % 2 == 1 and base.is_negative:
        r = (-base) ** sympy.Rational(e.numerator, e.denominator)
        return num(sympy.expand(-r if e.numerator % 2 else r))
    return num(sympy.expand(base ** sympy.Rational(e.numerator, e.denominator)))


# -- the environment a rule sees ----------------------------------------------------------------
AXIS_ORDER = ("dp", "dp_replicate", "dp_shard", "tp", "pp", "cp", "sp", "mb", "ep")
LEAVES = frozenset({"INPUT", "CONST", "DIM_SIZE", "AXIS_SIZE", "RANK_CONST", "CAUSAL_MASK",
                    "ROPE_COS", "ROPE_SIN"})
ELEMENTWISE = frozenset({"ADD", "MUL", "NEG", "RECIP", "EXP", "LOG", "SQRT", "RSQRT", "POW",
                         "SIGMOID", "SILU", "TANH", "GELU", "ERF", "MAXIMUM", "WHERE", "CAST",
                         "STOP_GRAD"})


def axis_rank(a: str) -> tuple[int, str]:
    return (AXIS_ORDER.index(a), "") if a in AXIS_ORDER else (len(AXIS_ORDER), a)


class Env:
    """Substitution, node table and real sizes, with the helpers the rules use."""

    def __init__(self, subst: Mapping[str, tuple[str, Any]], table: NodeTable,
                 binding: Mapping[str, int], varying: Callable[[int], frozenset[str]],
                 signs: Signs | None = None):
        self.s, self.tab, self.b, self.var = subst, table, binding, varying
        self.signs = signs if signs is not None else Signs(table)  # proofs/checker_signs.py

    # substitution
    def t(self, name: str) -> int:
        kind, v = self._get(name)
        if kind != "node":
            raise RuleMismatch(f"variable {name} must be a term")
        return v

    def ts(self, name: str) -> tuple[int, ...]:
        kind, v = self._get(name)
        if kind == "nodes":
            return v
        if kind == "attr" and v == ():
            return ()
        raise RuleMismatch(f"variable {name} must be a list of terms")

    def v(self, name: str) -> Any:
        kind, v = self._get(name)
        if kind != "attr":
            raise RuleMismatch(f"variable {name} must be an attribute")
        return v

    def _get(self, name: str) -> tuple[str, Any]:
        if name not in self.s:
            raise RuleMismatch(f"substitution has no variable {name}")
        return self.s[name]

    # nodes
    def op(self, i: int) -> str:
        return self.tab.nodes[i][0]

    def args(self, i: int) -> tuple[int, ...]:
        return self.tab.nodes[i][1]

    def attrs(self, i: int) -> tuple[Any, ...]:
        return self.tab.nodes[i][2]

    def dims(self, i: int) -> dict[str, tuple[str, ...]]:
        return dict(self.tab.nodes[i][3])

    def dimnames(self, xs: Any) -> set[str]:
        xs = [xs] if isinstance(xs, int) else xs
        return {n for x in xs for n, _ in self.tab.nodes[x][3]}

    def union(self, xs: tuple[int, ...]) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {}
        for x in xs:
            for n, s in self.tab.nodes[x][3]:
                if out.setdefault(n, s) != s:
                    raise RuleMismatch(f"operands disagree on dim {n}")
        return out

    def require(self, cond: bool, why: str) -> None:
        if not cond:
            raise RuleMismatch(f"guard fails: {why}")


# -- builders (the producer's constructors, as patterns) ----------------------------------------
def const(c: Any) -> P:
    return P("CONST", (num(c),))


def mul(*xs: Any) -> P:
    return P("MUL", (), tuple(xs))


def add(*xs: Any) -> P:
    return P("ADD", (), tuple(xs))


def pow_(x: Any, e: Any) -> P:
    return P("POW", (num(e),), (x,))


def shard(x: Any, d: str, a: str) -> P:
    return P("SHARD", (d, a), (x,))


def part(x: Any, a: str) -> P:
    return P("PART", (a,), (x,))


def all_reduce(x: Any, a: str, r: str) -> P:
    return P("ALL_REDUCE", (a, r), (x,))


def all_gather(x: Any, a: str, d: str) -> P:
    return P("ALL_GATHER", (a, d), (x,))


def einsum(xs: tuple[Any, ...], out: Any) -> P:
    return P("EINSUM", (tuple(sorted(set(out))),), tuple(xs))


def einsum_raw(xs: tuple[Any, ...], out: Any) -> P:
    return P("EINSUM", (tuple(out),), tuple(xs))


def reduce_max(x: Any, dims: Any) -> P:
    return P("REDUCE_MAX", (tuple(sorted(set(dims))),), (x,))


def rename(x: Any, old: str, new: str, nshards: tuple[str, ...] | None = None) -> P:
    return P("RENAME", (old, new), (x,), None if nshards is None else _DimIs(new, tuple(nshards)))


def chunk(x: Any, d: str, parts: int, i: int) -> P:
    return P("CHUNK", (d, parts, i), (x,))


def concat(xs: tuple[Any, ...], d: str, spec: tuple[str, ...] | None) -> P:
    return P("CONCAT", (d,), tuple(xs), None if spec is None else _DimIs(d, tuple(spec)))


def one_hot(idx: Any, v: str, shards: tuple[str, ...]) -> P:
    return P("ONE_HOT", (v,), (idx,), _DimIs(v, tuple(shards)))


class _DimIs(dict):
    """A dims constraint on one dim only: ``{d: shards}`` must be among the node's dims."""

    def __init__(self, d: str, shards: tuple[str, ...]):
        super().__init__({d: shards})


def _match(pat: Any, node: int, t: NodeTable, path: str) -> None:
    if isinstance(pat, P) and isinstance(pat.dims, _DimIs):
        (d, sh), = pat.dims.items()
        got = dict(t.nodes[node][3])
        if got.get(d) != sh:
            raise RuleMismatch(f"at {path}: dim {d} must have shards {sh}, found {got.get(d)} "
                               f"(node {node})")
        pat = P(pat.op, pat.attrs, pat.args, None)
    if isinstance(pat, P):
        op, args, attrs, dims = t.nodes[node]
        if op != pat.op:
            raise RuleMismatch(f"at {path}: expected op {pat.op}, found {op} (node {node})")
        if not _attrs_equal(pat.attrs, attrs):
            raise RuleMismatch(f"at {path}: expected attrs {pat.attrs!r}, found {attrs!r} "
                               f"(node {node})")
        if len(pat.args) != len(args):
            raise RuleMismatch(f"at {path}: expected {len(pat.args)} args, found {len(args)} "
                               f"(node {node})")
        if pat.dims is not None:
            got = dict(dims) if isinstance(pat.dims, dict) else tuple(dims)
            if got != pat.dims:
                raise RuleMismatch(f"at {path}: expected dims {pat.dims}, found {dims} "
                                   f"(node {node})")
        for k, (p, c) in enumerate(zip(pat.args, args)):
            _match(p, c, t, f"{path}/{k}")
        return
    if isinstance(pat, int) and not isinstance(pat, bool):
        if pat != node:
            raise RuleMismatch(f"at {path}: expected node {pat}, found node {node}")
        return
    raise RuleMismatch(f"at {path}: bad pattern {pat!r}")


# -- the table ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    name: str
    group: str
    law: str
    guard_doc: str
    sides: Callable[[Env], tuple[Any, Any]]  # patterns (lhs, rhs); raises when the guard fails


RULE_ROWS: list[Rule] = []   # in priority order: the modules register in import order


def rule_in(group: str) -> Callable[..., Callable]:
    """The decorator ``@rule(name, law, guard_doc)`` that appends a rule of ``group`` to
    :data:`RULE_ROWS` (``proofs/checker_rules.py`` imports the rule modules in the producer's
    priority order)."""
    def rule(name: str, law: str, guard_doc: str = "") -> Callable:
        def deco(f: Callable[[Env], tuple[Any, Any]]) -> Callable:
            RULE_ROWS.append(Rule(name, group, law, guard_doc, f))
            return f
        return deco
    return rule


# -- lifting helpers (SHARD over a mask of operands) ---------------------------------------------
def _lift_ok(e: Env, xs: tuple[int, ...], mask: tuple[bool, ...], d: str, a: str) -> bool:
    spec = None
    if len(xs) != len(mask) or not any(mask):
        return False
    for x, m in zip(xs, mask):
        if a in e.var(x):
            return False
        dims = e.dims(x)
        if m:
            if d not in dims:
                return False
            if spec is None:
                spec = dims[d]
            elif dims[d] != spec:
                return False
        elif d in dims:
            return False
    return True


def _join(xs: tuple[int, ...], mask: tuple[bool, ...], d: str, a: str) -> tuple[Any, ...]:
    return tuple(shard(x, d, a) if m else x for x, m in zip(xs, mask))


def _mask(e: Env) -> tuple[bool, ...]:
    m = e.v("mask")
    if not isinstance(m, tuple) or not all(isinstance(x, bool) for x in m):
        raise RuleMismatch("mask must be a list of booleans")
    return m


def _wf(e: Env, x: int, d: str, a: str) -> bool:
    return a not in e.var(x) and d in e.dims(x)
