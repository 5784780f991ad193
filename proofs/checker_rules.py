"""The checker's own copy of the rewrite-rule table (``docs/rules.md``), over kernel nodes.

A certificate's ``rule`` step names a rule and gives a substitution (variable -> node id, list
of node ids, or attribute value). For each rule this module rebuilds the two sides from the
substitution as *patterns* (op, attrs and children; dims where they carry information that the
kernel's shape rules do not fix, e.g. the output spec of ``ONE_HOT``/``CONCAT`` or the order
``dims-sort`` produces), matches them against the step's ``lhs`` and ``rhs`` nodes, and
re-evaluates the guard on the real sizes. Every node has already passed the kernel's shape
rules, so dims not fixed by a pattern are the ones the op's meaning implies.

Written by hand from ``docs/rules.md``: it imports nothing from ``rewriting/``. The laws and
guards are restated below so that the ruleset hash (:func:`ruleset_sha256`, over the
``(name, group, law, guard)`` rows in priority order) matches the producer's only if the tables
agree; a test checks that it does.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from proofs.checker_signs import Signs, pow_pow_keeps_definedness, product_keeps_definedness
from proofs.kernel import NodeTable

__all__ = ["RULESET", "RULES", "Rule", "RuleMismatch", "instantiate_and_match", "ruleset_sha256",
           "P"]


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


_RULES: list[Rule] = []
_GROUP = ["canonical"]


def rule(name: str, law: str, guard_doc: str = "") -> Callable:
    def deco(f: Callable[[Env], tuple[Any, Any]]) -> Callable:
        _RULES.append(Rule(name, _GROUP[0], law, guard_doc, f))
        return f
    return deco


# ==== canonical forms ==========================================================================
_DIMS_SORT_EXCLUDED = LEAVES | {"EINSUM", "REGION"}


@rule("dims-sort", "t = t with its dims listed by name (storage order is not meaning)",
      "t is not a leaf or EINSUM and its dims are not sorted by name")
def _dims_sort(e: Env) -> tuple[Any, Any]:
    t = e.t("t")
    op, args, attrs, dims = e.tab.nodes[t]
    names = [n for n, _ in dims]
    e.require(op not in _DIMS_SORT_EXCLUDED, f"{op} is a leaf or EINSUM")
    e.require(any(names[i] >= names[i + 1] for i in range(len(names) - 1)), "dims already sorted")
    return t, P(op, attrs, args, tuple(sorted(dims, key=lambda d: d[0])))


# STOP_GRAD is the identity forward (gradients were taken before normalisation)
@rule("stop-grad-elim", "STOP_GRAD(x) = x")
def _stop_grad(e: Env) -> tuple[Any, Any]:
    return P("STOP_GRAD", (), (e.t("x"),)), e.t("x")


# NEG x = (-1) * x
@rule("neg-mul", "NEG(x) = MUL(CONST(-1), x)")
def _neg_mul(e: Env) -> tuple[Any, Any]:
    return P("NEG", (), (e.t("x"),)), mul(const(-1), e.t("x"))


# 1/x = x^-1
@rule("recip-pow", "RECIP(x) = POW(x, -1)")
def _recip_pow(e: Env) -> tuple[Any, Any]:
    return P("RECIP", (), (e.t("x"),)), pow_(e.t("x"), -1)


# sqrt x = x^(1/2)
@rule("sqrt-pow", "SQRT(x) = POW(x, 1/2)")
def _sqrt_pow(e: Env) -> tuple[Any, Any]:
    return P("SQRT", (), (e.t("x"),)), pow_(e.t("x"), Fraction(1, 2))


# 1/sqrt x = x^(-1/2)
@rule("rsqrt-pow", "RSQRT(x) = POW(x, -1/2)")
def _rsqrt_pow(e: Env) -> tuple[Any, Any]:
    return P("RSQRT", (), (e.t("x"),)), pow_(e.t("x"), Fraction(-1, 2))


# CAST is the identity over the reals
@rule("cast-elim", "CAST(x, dtype) = x")
def _cast(e: Env) -> tuple[Any, Any]:
    return P("CAST", (e.v("dtype"),), (e.t("x"),)), e.t("x")


# sizes are the binding's integers
@rule("dim-size", "DIM_SIZE(d) = CONST(size(d))", "d is bound")
def _dim_size(e: Env) -> tuple[Any, Any]:
    d = e.v("d")
    e.require(isinstance(d, str) and d in e.b, f"dim {d!r} is not bound")
    return P("DIM_SIZE", (d,)), const(e.b[d])


@rule("axis-size", "AXIS_SIZE(a) = CONST(|a|)", "a is bound")
def _axis_size(e: Env) -> tuple[Any, Any]:
    a = e.v("a")
    e.require(isinstance(a, str) and a in e.b, f"axis {a!r} is not bound")
    return P("AXIS_SIZE", (a,)), const(e.b[a])


# a per-rank constant with the same value on every coordinate is a constant
@rule("rank-const-uniform", "RANK_CONST(a, (v, ..., v)) = CONST(v)",
      "every value equals the first and there are |a| of them")
def _rank_const_uniform(e: Env) -> tuple[Any, Any]:
    a, values = e.v("a"), tuple(e.v("values"))
    e.require(a in e.b and len(values) == e.b[a], "|a| values")
    e.require(all(_num_eq(num(v), num(values[0])) for v in values), "all values equal")
    return P("RANK_CONST", (a, values)), const(values[0])


# x^1 = x
@rule("pow-one", "POW(x, 1) = x")
def _pow_one(e: Env) -> tuple[Any, Any]:
    return pow_(e.t("x"), 1), e.t("x")


# c^e folded exactly
@rule("pow-const", "POW(CONST(c), e) = CONST(c^e)",
      "c^e is real and defined: c > 0, or e an integer and (c != 0 or e > 0)")
def _pow_const(e: Env) -> tuple[Any, Any]:
    c, x = num(e.v("c")), num(e.v("e"))
    e.require(isinstance(x, Fraction), "the exponent is rational")
    e.require(pow_is_real(c, x), f"{c}^{x} is real and defined")
    return pow_(const(c), x), const(num_pow(c, x))


# (x^a)^b = x^(ab), unless that would drop a sign
@rule("pow-pow", "POW(POW(x, a), b) = POW(x, a*b)",
      "b is an integer, or a's numerator is odd; both sides defined at the same inputs of the "
      "spec's domain (rewriting/signs.py)")
def _pow_pow(e: Env) -> tuple[Any, Any]:
    a, bb = Fraction(num(e.v("a"))), Fraction(num(e.v("b")))
    e.require(bb.denominator == 1 or a.numerator % 2 == 1, "b integer or a's numerator odd")
    e.require(pow_pow_keeps_definedness(e.signs, e.t("x"), a, bb),
              "both sides defined at the same inputs ((x^-1)^-1 = x needs x != 0)")
    return pow_(pow_(e.t("x"), a), bb), pow_(e.t("x"), a * bb)


# an integer power of a product is the product of the powers
@rule("pow-mul", "POW(MUL(xs), n) = MUL(POW(x, n) for x in xs)", "n is an integer")
def _pow_mul(e: Env) -> tuple[Any, Any]:
    xs, n = e.ts("xs"), num(e.v("e"))
    e.require(isinstance(n, Fraction) and n.denominator == 1, "n is an integer")
    return pow_(mul(*xs), n), mul(*[pow_(x, n) for x in xs])


def _flat(e: Env, op: str, xs: tuple[int, ...]) -> list[int]:
    out: list[int] = []
    stack = list(reversed(xs))
    while stack:
        x = stack.pop()
        if e.op(x) == op:
            stack.extend(reversed(e.args(x)))
        else:
            out.append(x)
    return out


def _coeff_monomial(e: Env, x: int) -> tuple[Any, tuple[int, ...]]:
    if e.op(x) == "CONST":
        return num(e.attrs(x)[0]), ()
    if e.op(x) == "MUL":
        c: Any = Fraction(1)
        fs = []
        for a in e.args(x):
            if e.op(a) == "CONST":
                c = num_mul(c, num(e.attrs(a)[0]))
            else:
                fs.append(a)
        return c, tuple(fs)
    return Fraction(1), (x,)


def _lin(e: Env, xs: tuple[int, ...]) -> dict[tuple[int, ...], Any]:
    """Formal linear combination {monomial (sorted factor ids): coefficient} of ADD(xs)."""
    out: dict[tuple[int, ...], Any] = {}
    for x in _flat(e, "ADD", xs):
        c, fs = _coeff_monomial(e, x)
        k = tuple(sorted(fs))
        out[k] = num_add(out.get(k, Fraction(0)), c)
    return {k: v for k, v in out.items() if not _num_eq(v, 0)}


def _same_coeffs(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(_num_eq(a[k], b[k]) for k in a)


def _nary(op: str, ys: tuple[int, ...], empty: Any) -> Any:
    if not ys:
        return empty
    return ys[0] if len(ys) == 1 else P(op, (), ys)


# sums are formal linear combinations
@rule("add-canon",
      "ADD(xs) = ADD(ys) (ys: the canonical sum; one term: ys[0]; none: CONST(0))",
      "lin(xs) == lin(ys) and the dims are the same set; a dropped monomial is defined on the "
      "spec's domain (rewriting/signs.py)")
def _add_canon(e: Env) -> tuple[Any, Any]:
    xs, ys = e.ts("xs"), e.ts("ys")
    e.require(bool(xs), "ADD has operands")
    e.require(_same_coeffs(_lin(e, xs), _lin(e, ys)), "lin(xs) == lin(ys)")
    e.require(e.dimnames(xs) == e.dimnames(ys), "same dims")
    e.require(all(e.signs.defined(f) for f in _dropped(e, xs, ys)),
              "a dropped monomial is defined (x^-1 - x^-1 = 0 needs x != 0)")
    return add(*xs), _nary("ADD", ys, const(0))


def _dropped(e: Env, xs: tuple[int, ...], ys: tuple[int, ...]) -> list[int]:
    """Factors of the monomials of ADD(xs) whose coefficients sum to 0 and that ys drops."""
    tot: dict[tuple[int, ...], Any] = {}
    for x in _flat(e, "ADD", xs):
        c, fs = _coeff_monomial(e, x)
        k = tuple(sorted(fs))
        tot[k] = num_add(tot.get(k, Fraction(0)), c)
    kept = {tuple(sorted(_coeff_monomial(e, y)[1])) for y in _flat(e, "ADD", ys)}
    return [f for k, c in tot.items() if _num_eq(c, 0) and k not in kept for f in k]


def _mono(e: Env, xs: tuple[int, ...]) -> tuple[Any, dict[int, Fraction]]:
    c: Any = Fraction(1)
    ex: Counter = Counter()
    for x in _flat(e, "MUL", xs):
        if e.op(x) == "CONST":
            c = num_mul(c, num(e.attrs(x)[0]))
        elif e.op(x) == "POW":
            ex[e.args(x)[0]] += Fraction(num(e.attrs(x)[0]))
        else:
            ex[x] += 1
    return c, {k: v for k, v in ex.items() if v != 0}


# products are monomials c * prod base^e
@rule("mul-canon",
      "MUL(xs) = MUL(ys) (ys: the canonical product; one factor: ys[0]; none: CONST(1))",
      "mono(xs) == mono(ys) and the dims are the same set (or both are 0 and scalar); both "
      "sides defined at the same inputs of the spec's domain (rewriting/signs.py)")
def _mul_canon(e: Env) -> tuple[Any, Any]:
    xs, ys = e.ts("xs"), e.ts("ys")
    e.require(bool(xs), "MUL has operands")
    e.require(product_keeps_definedness(e.signs, xs, ys),
              "both sides defined at the same inputs (x^-1 * x = 1 needs x != 0)")
    c1, e1 = _mono(e, xs)
    c2, e2 = _mono(e, ys)
    zero_scalar = _num_eq(c1, 0) and _num_eq(c2, 0) and not e.dimnames(xs)
    e.require(zero_scalar or (_num_eq(c1, c2) and e1 == e2
                              and e.dimnames(xs) == e.dimnames(ys)), "mono(xs) == mono(ys)")
    return mul(*xs), _nary("MUL", ys, const(1))


# a scaled sum inside a sum is part of one linear combination: distribute its constant
@rule("add-scaled-sum",
      "ADD(xs with xs[k] = MUL(CONST(c), ADD(ys))) = ADD(xs with xs[k] -> MUL(CONST(c), y)...)",
      "xs[k] is exactly MUL(CONST(c), ADD(ys))")
def _add_scaled_sum(e: Env) -> tuple[Any, Any]:
    xs, k = e.ts("xs"), e.v("k")
    e.require(isinstance(k, int) and not isinstance(k, bool) and 0 <= k < len(xs), "k indexes xs")
    x = xs[k]
    e.require(e.op(x) == "MUL" and len(e.args(x)) == 2 and e.op(e.args(x)[0]) == "CONST"
              and e.op(e.args(x)[1]) == "ADD", "xs[k] is MUL(CONST(c), ADD(ys))")
    c, inner = e.args(x)
    return add(*xs), add(*(xs[:k] + tuple(mul(c, y) for y in e.args(inner)) + xs[k + 1:]))


# a sum's content leaves it: c*a + c*k*b = c * (a + k*b)
@rule("add-content", "ADD(xs) = MUL(CONST(c), ADD(MUL(CONST(1/c), x) for x in xs))", "c != 0")
def _add_content(e: Env) -> tuple[Any, Any]:
    xs, c = e.ts("xs"), num(e.v("c"))
    e.require(not _num_eq(c, 0), "c != 0")
    inv = const(num_pow(c, Fraction(-1)))
    return add(*xs), mul(const(c), add(*[mul(inv, x) for x in xs]))


# sort einsum operands and out_dims
@rule("einsum-canon", "EINSUM(xs, out) = EINSUM(ys, sorted(out))", "ys is a permutation of xs")
def _einsum_canon(e: Env) -> tuple[Any, Any]:
    xs, ys, out = e.ts("xs"), e.ts("ys"), tuple(e.v("out"))
    e.require(Counter(xs) == Counter(ys), "ys is a permutation of xs")
    return einsum_raw(xs, out), einsum(ys, out)


# an einsum of one operand that keeps every dim is the operand
@rule("einsum-identity", "EINSUM((x,), out) = x", "set(out) == dims of x")
def _einsum_identity(e: Env) -> tuple[Any, Any]:
    x, out = e.t("x"), tuple(e.v("out"))
    e.require(set(out) == e.dimnames(x), "set(out) == dims of x")
    return einsum((x,), out), x


# a contraction that sums over nothing is the pointwise product
@rule("einsum-pointwise", "EINSUM(xs, out) = MUL(xs)",
      "at least two operands, and out holds every dim of every operand")
def _einsum_pointwise(e: Env) -> tuple[Any, Any]:
    xs, out = e.ts("xs"), tuple(e.v("out"))
    e.require(len(xs) >= 2 and set(out) == e.dimnames(xs),
              "at least two operands, and out holds every dim of every operand")
    return einsum_raw(xs, out), mul(*xs)


def _scalar_split(e: Env, xs: tuple[int, ...]) -> tuple[list[int], list[Any]]:
    scal: list[int] = []
    rest: list[Any] = []
    for x in xs:
        if not e.dims(x):
            scal.append(x)
        elif e.op(x) == "MUL" and any(not e.dims(a) for a in e.args(x)):
            scal.extend(a for a in e.args(x) if not e.dims(a))
            r = [a for a in e.args(x) if e.dims(a)]
            rest.append(r[0] if len(r) == 1 else mul(*r))
        else:
            rest.append(x)
    return scal, rest


# scalar factors leave a contraction
@rule("einsum-scalar-out", "EINSUM(xs, out) = MUL(scalars..., EINSUM(rest, out))",
      "some operand is a scalar or a MUL with scalar factors, and a non-scalar remains")
def _einsum_scalar_out(e: Env) -> tuple[Any, Any]:
    xs, out = e.ts("xs"), tuple(e.v("out"))
    scal, rest = _scalar_split(e, xs)
    e.require(bool(scal) and bool(rest), "scalars and a non-scalar")
    return einsum(xs, out), mul(*scal, einsum(tuple(rest), out))


# a contraction multiplies its operands pointwise: they form one canonical product
@rule("einsum-mul-canon",
      "EINSUM(xs, out) = EINSUM(ys, out) (ys: the product's canonical factors)",
      "mono(xs) == mono(ys) with constant 1, ys non-empty, the dims are the same set; both sides "
      "defined at the same inputs of the spec's domain (rewriting/signs.py)")
def _einsum_mul_canon(e: Env) -> tuple[Any, Any]:
    xs, ys, out = e.ts("xs"), e.ts("ys"), tuple(e.v("out"))
    c1, e1 = _mono(e, xs)
    c2, e2 = _mono(e, ys)
    e.require(_num_eq(c1, 1) and _num_eq(c2, 1) and e1 == e2 and bool(ys)
              and e.dimnames(xs) == e.dimnames(ys), "mono(xs) == mono(ys) with constant 1")
    e.require(product_keeps_definedness(e.signs, xs, ys),
              "both sides defined at the same inputs (x^-1 * x = 1 needs x != 0)")
    return einsum(xs, out), einsum(ys, out)


def _move_scalar(e: Env, op: str) -> tuple[Any, Any]:
    xs, attrs = e.ts("xs"), tuple(e.v("attrs"))
    scal = [x for x in xs if not e.dims(x)]
    rest = [x for x in xs if e.dims(x)]
    e.require(bool(scal) and bool(rest), "a dimless factor and another")
    inner = rest[0] if len(rest) == 1 else mul(*rest)

    def rebuild(x: Any) -> P:
        if op == "RENAME":
            return rename(x, attrs[0], attrs[1], tuple(e.v("nshards")))
        return chunk(x, *attrs)
    return rebuild(mul(*xs)), mul(*scal, rebuild(inner))


# renaming and taking a chunk are linear: scalar factors move out of them
@rule("rename-scalar-out", "RENAME(MUL(xs), o, n) = MUL(scalars..., RENAME(MUL(rest...), o, n))",
      "some factor of the MUL is dimless, and some is not")
def _rename_scalar_out(e: Env) -> tuple[Any, Any]:
    return _move_scalar(e, "RENAME")


@rule("chunk-scalar-out",
      "CHUNK(MUL(xs), d, p, i) = MUL(scalars..., CHUNK(MUL(rest...), d, p, i))",
      "some factor of the MUL is dimless, and some is not")
def _chunk_scalar_out(e: Env) -> tuple[Any, Any]:
    return _move_scalar(e, "CHUNK")


# a concatenation is linear: the first non-zero block coefficient leaves it
@rule("concat-content",
      "CONCAT(xs, d) = MUL(CONST(c), CONCAT(MUL(CONST(1/c), x) for x in xs, d))", "c != 0")
def _concat_content(e: Env) -> tuple[Any, Any]:
    xs, d, csh, c = e.ts("xs"), e.v("d"), tuple(e.v("cshards")), num(e.v("c"))
    e.require(not _num_eq(c, 0), "c != 0")
    inv = const(num_pow(c, Fraction(-1)))
    return concat(xs, d, csh), mul(const(c), concat(tuple(mul(inv, x) for x in xs), d, csh))


# ---- completeness rules (issue 12): rewriting/contraction.py, powers.py, unit_axis.py ------
def _contracted(e: Env, xs: tuple[Any, ...], out: tuple[str, ...]) -> set[str]:
    return e.dimnames(xs) - set(out)


def _unit_dims(e: Env, x: int, names: set[str]) -> set[str]:
    """Dims among ``names`` that x holds unsharded and that have size 1."""
    return {n for n, sh in e.dims(x).items() if n in names and not sh and e.b.get(n) == 1}


def _is_unit_squeeze(e: Env, x: int) -> bool:
    if e.op(x) != "EINSUM" or len(e.args(x)) != 1:
        return False
    c = _contracted(e, e.args(x), tuple(e.attrs(x)[0]))
    return _unit_dims(e, e.args(x)[0], c) == c


def _squeeze(e: Env, x: int, u: set[str]) -> Any:
    mine = set(e.dims(x)) & u
    return einsum((x,), [n for n in e.dims(x) if n not in mine]) if mine else x


@rule("einsum-nested", "EINSUM(..EINSUM(zs, o1)..ys.., out) = EINSUM(..zs..ys.., out)",
      "the dims zs contract occur in no other operand, not in out and not among the dims another "
      "operand sums (an EINSUM, under collectives and shards); the inner EINSUM is not a sum "
      "over size-1 dims only")
def _einsum_nested(e: Env) -> tuple[Any, Any]:
    xs, k, out = e.ts("xs"), e.v("k"), tuple(e.v("out"))
    e.require(isinstance(k, int) and not isinstance(k, bool) and 0 <= k < len(xs)
              and e.op(xs[k]) == "EINSUM" and not _is_unit_squeeze(e, xs[k]),
              "xs[k] is an EINSUM, not a unit squeeze")
    inner = xs[k]
    others = xs[:k] + xs[k + 1:]
    outside = e.dimnames(others) | set(out)
    bound: set[str] = set()
    for x in others:
        while e.op(x) in ("ALL_REDUCE", "SHARD", "PART", "BROADCAST", "ALL_GATHER",
                          "REDUCE_SCATTER"):
            x = e.args(x)[0]
        if e.op(x) == "EINSUM":
            bound |= _contracted(e, e.args(x), tuple(e.attrs(x)[0]))
    e.require(not _contracted(e, e.args(inner), tuple(e.attrs(inner)[0])) & (outside | bound),
              "the inner contracted dims occur nowhere else")
    return einsum(xs, out), einsum(xs[:k] + e.args(inner) + xs[k + 1:], out)


@rule("einsum-unit-dim", "EINSUM(xs, out) = EINSUM(EINSUM((x,), dims(x) - U) for x in xs, out)",
      "U = the contracted dims of size 1 (unsharded) is non-empty, and the EINSUM is not a sum "
      "of one operand over dims of U only")
def _einsum_unit_dim(e: Env) -> tuple[Any, Any]:
    xs, out = e.ts("xs"), tuple(e.v("out"))
    c = _contracted(e, xs, out)
    u = {n for x in xs for n in _unit_dims(e, x, c)}
    e.require(bool(u) and not (len(xs) == 1 and u == c), "U non-empty, not a squeeze")
    return einsum(xs, out), einsum(tuple(_squeeze(e, x, u) for x in xs), out)


@rule("reduce-max-unit-dim",
      "REDUCE_MAX(x, dims) = REDUCE_MAX(EINSUM((x,), dims(x) - U), dims - U)  (no REDUCE_MAX "
      "when dims = U)", "U = the dims among dims of size 1 (unsharded) is non-empty")
def _reduce_max_unit_dim(e: Env) -> tuple[Any, Any]:
    x, dims = e.t("x"), tuple(e.v("dims"))
    u = _unit_dims(e, x, set(dims))
    e.require(bool(u), "U non-empty")
    rest = [n for n in dims if n not in u]
    sq = _squeeze(e, x, u)
    return reduce_max(x, dims), (reduce_max(sq, rest) if rest else sq)


@rule("einsum-factor-out", "EINSUM(xs, out) = MUL(fs..., EINSUM(rest, out'))  (out' = out "
      "restricted to the rest)", "fs = the operands with dims, all in out (non-empty); the rest "
      "is non-empty and sums some dim")
def _einsum_factor_out(e: Env) -> tuple[Any, Any]:
    xs, out = e.ts("xs"), tuple(e.v("out"))
    keep = set(out)
    pulled = [x for x in xs if e.dims(x) and set(e.dims(x)) <= keep]
    rest = tuple(x for x in xs if x not in pulled)
    e.require(bool(pulled) and bool(rest) and bool(e.dimnames(rest) - keep),
              "factors constant along the contraction, and a contraction left")
    have = e.dimnames(rest)
    return einsum(xs, out), mul(*pulled, einsum(rest, [n for n in out if n in have]))


def _components(e: Env, xs: tuple[int, ...], out: tuple[str, ...]) -> list[list[int]]:
    """Operand positions grouped by "shares a summed dim", groups in order of first operand."""
    summed = e.dimnames(xs) - set(out)
    groups: list[list[int]] = []
    for i, x in enumerate(xs):
        mine = set(e.dims(x)) & summed
        hit = [g for g in groups if any(set(e.dims(xs[j])) & mine for j in g)]
        merged = sorted([i] + [j for g in hit for j in g])
        groups = [g for g in groups if g not in hit] + [merged]
    return sorted(groups, key=lambda g: g[0])


@rule("einsum-components", "EINSUM(xs, out) = MUL(EINSUM(K_j, out & dims(K_j)) for each K_j)",
      "the operands form two or more groups K_j that share no summed dim")
def _einsum_components(e: Env) -> tuple[Any, Any]:
    xs, out = e.ts("xs"), tuple(e.v("out"))
    groups = _components(e, xs, out)
    e.require(len(xs) >= 2 and len(groups) >= 2, "two or more groups")
    parts = []
    for g in groups:
        ys = tuple(xs[i] for i in g)
        have = e.dimnames(ys)
        parts.append(einsum(ys, [n for n in out if n in have]))
    return einsum(xs, out), mul(*parts)


def _positive(v: Any) -> bool:
    c = num(v)
    return c > 0 if isinstance(c, Fraction) else bool(_sym(c) > 0)


@rule("pow-const-factor", "POW(MUL(.., CONST(c), ..), e) = MUL(CONST(c^e), POW(MUL(..  ..), e))",
      "e is not an integer and c > 0")
def _pow_const_factor(e: Env) -> tuple[Any, Any]:
    xs, k, ex = e.ts("xs"), e.v("k"), num(e.v("e"))
    e.require(isinstance(ex, Fraction) and ex.denominator != 1, "e is not an integer")
    e.require(isinstance(k, int) and not isinstance(k, bool) and 0 <= k < len(xs)
              and len(xs) >= 2 and e.op(xs[k]) == "CONST" and _positive(e.attrs(xs[k])[0]),
              "xs[k] is a positive constant")
    rest = xs[:k] + xs[k + 1:]
    inner = rest[0] if len(rest) == 1 else mul(*rest)
    c = num_pow(num(e.attrs(xs[k])[0]), ex)
    return pow_(mul(*xs), ex), mul(const(c), pow_(inner, ex))


@rule("silu-def", "SILU(x) = MUL(x, SIGMOID(x))")
def _silu_def(e: Env) -> tuple[Any, Any]:
    x = e.t("x")
    return P("SILU", (), (x,)), mul(x, P("SIGMOID", (), (x,)))


@rule("gelu-def", "GELU(x) = MUL(CONST(1/2), x, ADD(CONST(1), ERF(MUL(CONST(1/sqrt 2), x))))")
def _gelu_def(e: Env) -> tuple[Any, Any]:
    import sympy

    x = e.t("x")
    return P("GELU", (), (x,)), mul(const(Fraction(1, 2)), x,
                                    add(const(1), P("ERF", (), (mul(const(1 / sympy.sqrt(2)),
                                                                     x),))))


_GROUP[0] = "collectives"


def _unit_axis(e: Env, a: Any) -> bool:
    return isinstance(a, str) and e.b.get(a) == 1


@rule("allreduce-unit-axis", "ALL_REDUCE(x, a, r) = x", "|a| == 1")
def _allreduce_unit_axis(e: Env) -> tuple[Any, Any]:
    x, a, r = e.t("x"), e.v("a"), e.v("r")
    e.require(_unit_axis(e, a), "|a| == 1")
    return all_reduce(x, a, r), x


@rule("part-unit-axis", "PART(x, a) = x", "|a| == 1")
def _part_unit_axis(e: Env) -> tuple[Any, Any]:
    x, a = e.t("x"), e.v("a")
    e.require(_unit_axis(e, a), "|a| == 1")
    return part(x, a), x


@rule("broadcast-unit-axis", "BROADCAST(x, a, src) = x", "|a| == 1")
def _broadcast_unit_axis(e: Env) -> tuple[Any, Any]:
    x, a, src = e.t("x"), e.v("a"), e.v("src")
    e.require(_unit_axis(e, a), "|a| == 1")
    return P("BROADCAST", (a, src), (x,)), x


@rule("einsum-unit-axis",
      "EINSUM(..SHARD(x_i, d, a)..y_j.., out) = EINSUM(..x_i..y_j.., out)",
      "|a| == 1; d not in out; the blocks share d's spec; the y_j lack d")
def _einsum_unit_axis(e: Env) -> tuple[Any, Any]:
    xs, mask, d, a, out = e.ts("xs"), _mask(e), e.v("d"), e.v("a"), tuple(e.v("out"))
    e.require(_unit_axis(e, a) and d not in out and len(xs) == len(mask) and any(mask),
              "|a| == 1, d not in out")
    specs = {e.dims(x).get(d) for x, m in zip(xs, mask) if m}
    e.require(len(specs) == 1 and None not in specs
              and not any(d in e.dims(x) for x, m in zip(xs, mask) if not m),
              "the blocks share d's spec; the other operands lack d")
    return einsum(_join(xs, mask, d, a), out), einsum(xs, out)


@rule("reduce-max-unit-axis", "REDUCE_MAX(SHARD(x, d, a), dims) = REDUCE_MAX(x, dims)",
      "|a| == 1 and d in dims")
def _reduce_max_unit_axis(e: Env) -> tuple[Any, Any]:
    x, d, a, dims = e.t("x"), e.v("d"), e.v("a"), tuple(e.v("dims"))
    e.require(_unit_axis(e, a) and d in dims and d in e.dims(x), "|a| == 1 and d in dims")
    return reduce_max(shard(x, d, a), dims), reduce_max(x, dims)


@rule("allgather-unit-axis", "ALL_GATHER(SHARD(x, d, a), a, d) = x", "|a| == 1")
def _allgather_unit_axis(e: Env) -> tuple[Any, Any]:
    x, a, d = e.t("x"), e.v("a"), e.v("d")
    e.require(_unit_axis(e, a) and d in e.dims(x), "|a| == 1")
    return all_gather(shard(x, d, a), a, d), x


# ==== SHARD lifting ============================================================================
_GROUP[0] = "lifting"
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


# blocks along different dims commute; the higher-ranked axis goes outside
@rule("shard-swap", "SHARD(SHARD(x, d1, a1), d2, a2) = SHARD(SHARD(x, d2, a2), d1, a1)",
      "d1 != d2 and rank(a1) > rank(a2)")
def _shard_swap(e: Env) -> tuple[Any, Any]:
    x, d1, a1, d2, a2 = e.t("x"), e.v("d1"), e.v("a1"), e.v("d2"), e.v("a2")
    e.require(d1 != d2 and axis_rank(a1) > axis_rank(a2), "d1 != d2 and rank(a1) > rank(a2)")
    e.require(a1 not in e.var(x) and a2 not in e.var(x), "x varies over neither axis")
    return shard(shard(x, d1, a1), d2, a2), shard(shard(x, d2, a2), d1, a1)


# an elementwise op of blocks is the block of the op
@rule("lift-shard-elementwise",
      "op(..SHARD(x_i, d, a)..y_j..) = SHARD(op(..x_i..y_j..), d, a)  (op elementwise)",
      "some operand is SHARD(., d, a); those share d's spec; no operand varies over a after "
      "unwrapping; non-block operands lack d")
def _lift_ew(e: Env) -> tuple[Any, Any]:
    op, attrs, xs, mask, d, a = e.v("op"), e.v("attrs"), e.ts("xs"), _mask(e), e.v("d"), e.v("a")
    e.require(op in ELEMENTWISE, f"{op} is elementwise")
    e.require(_lift_ok(e, xs, mask, d, a), "lift condition")
    return P(op, tuple(attrs), _join(xs, mask, d, a)), shard(P(op, tuple(attrs), xs), d, a)


# a contraction that keeps d, of blocks along d, is the block of the contraction
@rule("lift-shard-einsum",
      "EINSUM(..SHARD(x_i, d, a)..y_j.., out) = SHARD(EINSUM(..x_i..y_j.., out), d, a)",
      "d in out, and the lift-shard-elementwise condition")
def _lift_einsum(e: Env) -> tuple[Any, Any]:
    xs, mask, d, a, out = e.ts("xs"), _mask(e), e.v("d"), e.v("a"), tuple(e.v("out"))
    e.require(d in out and _lift_ok(e, xs, mask, d, a), "d in out and the lift condition")
    return einsum(_join(xs, mask, d, a), out), shard(einsum(xs, out), d, a)


# max over other dims commutes with taking a block along d
@rule("lift-shard-reduce-max",
      "REDUCE_MAX(SHARD(x, d, a), dims) = SHARD(REDUCE_MAX(x, dims), d, a)", "d not in dims")
def _lift_rmax(e: Env) -> tuple[Any, Any]:
    x, d, a, dims = e.t("x"), e.v("d"), e.v("a"), tuple(e.v("dims"))
    e.require(d not in dims and _wf(e, x, d, a), "d not in dims")
    return reduce_max(shard(x, d, a), dims), shard(reduce_max(x, dims), d, a)


# renaming commutes with taking a block (the block's dim is renamed with it)
@rule("lift-shard-rename",
      "RENAME(SHARD(x, d, a), old, new) = SHARD(RENAME(x, old, new), d', a)  (d' = new if d = old)",
      "the output spec of new is nshards; if d = old, nshards ends with a (the inner RENAME gets "
      "nshards without it)")
def _lift_rename(e: Env) -> tuple[Any, Any]:
    x, d, a, old, new = e.t("x"), e.v("d"), e.v("a"), e.v("old"), e.v("new")
    nsh = tuple(e.v("nshards"))
    e.require(_wf(e, x, d, a), "x does not vary over a and has d")
    if d == old:
        e.require(bool(nsh) and nsh[-1] == a, "nshards ends with a")
    d2 = new if d == old else d
    inner = nsh[:-1] if d == old else nsh
    return rename(shard(x, d, a), old, new, nsh), shard(rename(x, old, new, inner), d2, a)


# a chunk along another dim commutes with taking a block
@rule("lift-shard-chunk",
      "CHUNK(SHARD(x, d, a), c, parts, i) = SHARD(CHUNK(x, c, parts, i), d, a)", "c != d")
def _lift_chunk(e: Env) -> tuple[Any, Any]:
    x, d, a, cd, parts, i = (e.t("x"), e.v("d"), e.v("a"), e.v("cd"), e.v("parts"),
                             e.v("index"))
    e.require(cd != d and _wf(e, x, d, a), "c != d")
    return chunk(shard(x, d, a), cd, parts, i), shard(chunk(x, cd, parts, i), d, a)


# concatenating blocks along another dim is the block of the concatenation
@rule("lift-shard-concat", "CONCAT(SHARD(x_i, d, a)..., c) = SHARD(CONCAT(x_i..., c), d, a)",
      "c != d; every operand is SHARD(., d, a) with the same spec of d")
def _lift_concat(e: Env) -> tuple[Any, Any]:
    xs, d, a, cd, csh = e.ts("xs"), e.v("d"), e.v("a"), e.v("cd"), tuple(e.v("cshards"))
    e.require(cd != d and _lift_ok(e, xs, (True,) * len(xs), d, a), "c != d and lift condition")
    return (concat(tuple(shard(x, d, a) for x in xs), cd, csh),
            shard(concat(xs, cd, csh), d, a))


# vocab-parallel lookup: the one-hot over the rank's vocab block is the block of the one-hot
@rule("onehot-shard-out", "ONE_HOT(idx, v)[v: s+(a,)] = SHARD(ONE_HOT(idx, v)[v: s], v, a)",
      "v's spec in the output ends with a mesh axis a, and idx does not vary over a")
def _onehot_out(e: Env) -> tuple[Any, Any]:
    idx, v, sh = e.t("idx"), e.v("v"), tuple(e.v("vshards"))
    e.require(bool(sh) and not sh[-1].startswith("#") and sh[-1] not in e.var(idx)
              and v not in e.dims(idx), "v's spec ends with a mesh axis idx does not vary over")
    return one_hot(idx, v, sh), shard(one_hot(idx, v, sh[:-1]), v, sh[-1])


# one-hot is positionwise in the indices
@rule("lift-shard-onehot", "ONE_HOT(SHARD(idx, d, a), v) = SHARD(ONE_HOT(idx, v), d, a)",
      "a is not in v's spec")
def _lift_onehot(e: Env) -> tuple[Any, Any]:
    x, d, a, v, sh = e.t("x"), e.v("d"), e.v("a"), e.v("v"), tuple(e.v("vshards"))
    e.require(a not in sh and _wf(e, x, d, a) and d != v, "a not in v's spec")
    return one_hot(shard(x, d, a), v, sh), shard(one_hot(x, v, sh), d, a)


# top-k along e acts on each position of the other dims alone
@rule("lift-shard-topk", "TOPK_MASK(SHARD(x, d, a), e, k) = SHARD(TOPK_MASK(x, e, k), d, a)",
      "d != e, and x does not vary over a")
def _lift_topk(e: Env) -> tuple[Any, Any]:
    x, d, a, ee, k = e.t("x"), e.v("d"), e.v("a"), e.v("e"), e.v("k")
    e.require(d != ee and _wf(e, x, d, a), "d != e and x does not vary over a")
    return P("TOPK_MASK", (ee, k), (shard(x, d, a),)), shard(P("TOPK_MASK", (ee, k), (x,)), d, a)


# the eligibility form: score and eligibility blocks along d != e give the block of the mask
@rule("lift-shard-topk-elig",
      "TOPK_MASK(SHARD(x, d, a), SHARD(el, d, a), e, k) = SHARD(TOPK_MASK(x, el, e, k), d, a)",
      "d != e, x and el have the same spec of d and do not vary over a")
def _lift_topk_elig(e: Env) -> tuple[Any, Any]:
    x, el, d, a, ee, k = e.t("x"), e.t("el"), e.v("d"), e.v("a"), e.v("e"), e.v("k")
    e.require(d != ee and _lift_ok(e, (x, el), (True, True), d, a),
              "d != e, x and el have the same spec of d and do not vary over a")
    return (P("TOPK_MASK", (ee, k), (shard(x, d, a), shard(el, d, a))),
            shard(P("TOPK_MASK", (ee, k), (x, el)), d, a))


# a shift along e moves positions along e only: a block along d != e gives the shifted block
@rule("lift-shard-shift", "SHIFT(SHARD(x, d, a), e) = SHARD(SHIFT(x, e), d, a)",
      "d != e, and x does not vary over a")
def _lift_shift(e: Env) -> tuple[Any, Any]:
    x, d, a, ee = e.t("x"), e.v("d"), e.v("a"), e.v("e")
    e.require(d != ee and _wf(e, x, d, a), "d != e and x does not vary over a")
    return P("SHIFT", (ee,), (shard(x, d, a),)), shard(P("SHIFT", (ee,), (x,)), d, a)


# ==== collectives ==============================================================================
_GROUP[0] = "collectives"
# a replicated value summed over |a| coordinates is |a| times the value
@rule("allreduce-sum-invariant", "ALL_REDUCE(x, a, sum) = MUL(CONST(|a|), x)",
      "x does not vary over a")
def _ar_sum_inv(e: Env) -> tuple[Any, Any]:
    x, a = e.t("x"), e.v("a")
    e.require(a not in e.var(x), "x does not vary over a")
    e.require(a in e.b, f"axis {a} is bound")
    return all_reduce(x, a, "sum"), mul(const(e.b[a]), x)


# the max of copies is the value
@rule("allreduce-max-invariant", "ALL_REDUCE(x, a, max) = x", "x does not vary over a")
def _ar_max_inv(e: Env) -> tuple[Any, Any]:
    x, a = e.t("x"), e.v("a")
    e.require(a not in e.var(x), "x does not vary over a")
    return all_reduce(x, a, "max"), x


# the addends of a Partial(sum) sum to the value
@rule("allreduce-part", "ALL_REDUCE(PART(x, a), a, sum) = x", "x does not vary over a")
def _ar_part(e: Env) -> tuple[Any, Any]:
    x, a = e.t("x"), e.v("a")
    e.require(a not in e.var(x), "x does not vary over a")
    return all_reduce(part(x, a), a, "sum"), x


# the sum over a of a per-rank constant on a is the sum of its values
@rule("allreduce-rank-const", "ALL_REDUCE(RANK_CONST(a, vs), a, sum) = CONST(sum(vs))",
      "|vs| == |a|")
def _ar_rank_const(e: Env) -> tuple[Any, Any]:
    a, values = e.v("a"), tuple(e.v("values"))
    e.require(a in e.b and len(values) == e.b[a], "|vs| == |a|")
    total = Fraction(0)
    for v in values:
        total = num_add(total, num(v))
    return all_reduce(P("RANK_CONST", (a, values)), a, "sum"), const(total)


# reducing over a commutes with taking a block over another axis b
@rule("allreduce-shard-comm",
      "ALL_REDUCE(SHARD(x, d, b), a, r) = SHARD(ALL_REDUCE(x, a, r), d, b)",
      "b != a; no dim of x is sharded over a")
def _ar_shard_comm(e: Env) -> tuple[Any, Any]:
    x, d, bb, a, r = e.t("x"), e.v("d"), e.v("b"), e.v("a"), e.v("r")
    e.require(bb != a and bb not in e.var(x) and d in e.dims(x), "b != a")
    e.require(not _blocks_over(e, x, a), "no dim of x is sharded over a")
    e.require(r in ("sum", "max"), "r is sum or max")
    return all_reduce(shard(x, d, bb), a, r), shard(all_reduce(x, a, r), d, bb)


# a sum of sums is the sum of the sums
@rule("allreduce-add", "ALL_REDUCE(ADD(xs), a, sum) = ADD(ALL_REDUCE(x, a, sum) for x in xs)")
def _ar_add(e: Env) -> tuple[Any, Any]:
    xs, a = e.ts("xs"), e.v("a")
    return all_reduce(add(*xs), a, "sum"), add(*[all_reduce(x, a, "sum") for x in xs])


# factors that do not vary over a leave the sum over a
@rule("allreduce-mul-factor",
      "ALL_REDUCE(MUL(xs), a, sum) = MUL(fixed..., ALL_REDUCE(MUL(vary...), a, sum))",
      "fixed = the xs not varying over a (non-empty), vary = the others (non-empty; one: itself)")
def _ar_mul_factor(e: Env) -> tuple[Any, Any]:
    xs, a = e.ts("xs"), e.v("a")
    fixed = [x for x in xs if a not in e.var(x)]
    vary = [x for x in xs if a in e.var(x)]
    e.require(bool(fixed) and bool(vary), "fixed and varying factors")
    inner = vary[0] if len(vary) == 1 else mul(*vary)
    return all_reduce(mul(*xs), a, "sum"), mul(*fixed, all_reduce(inner, a, "sum"))


# summing the partial contractions of blocks along a contracted dim d is the contraction
@rule("allreduce-einsum-split",
      "ALL_REDUCE(EINSUM(..SHARD(x_i, d, a)..y_j.., out), a, sum) = EINSUM(..x_i..y_j.., out)",
      "d not in out; the blocks share d's spec; no x_i, y_j varies over a; the y_j lack d")
def _ar_split(e: Env) -> tuple[Any, Any]:
    xs, mask, d, a, out = e.ts("xs"), _mask(e), e.v("d"), e.v("a"), tuple(e.v("out"))
    e.require(d not in out and _lift_ok(e, xs, mask, d, a), "d not in out and lift condition")
    return all_reduce(einsum(_join(xs, mask, d, a), out), a, "sum"), einsum(xs, out)


# a contraction is linear in each operand: the sum moves into the one varying operand
@rule("allreduce-einsum-push",
      "ALL_REDUCE(EINSUM(xs, out), a, sum) = EINSUM(xs with x_k -> ALL_REDUCE(x_k, a, sum), out)",
      "exactly one operand x_k varies over a, and no dim of x_k is sharded over a")
def _ar_push(e: Env) -> tuple[Any, Any]:
    xs, a, out = e.ts("xs"), e.v("a"), tuple(e.v("out"))
    vary = [i for i, x in enumerate(xs) if a in e.var(x)]
    e.require(len(vary) == 1, "exactly one operand varies over a")
    e.require(not _blocks_over(e, xs[vary[0]], a), "no dim of x_k is sharded over a")
    ys: list[Any] = list(xs)
    ys[vary[0]] = all_reduce(xs[vary[0]], a, "sum")
    return all_reduce(einsum(xs, out), a, "sum"), einsum(tuple(ys), out)


def _blocks_over(e: Env, x: int, a: str) -> bool:
    """Some dim of x is sharded over a."""
    return any(a in s for s in e.dims(x).values())


def _move(e: Env, op: str, xs: tuple[Any, ...]) -> P:
    attrs = tuple(e.v("attrs"))
    if op == "RENAME":
        return rename(xs[0], *attrs, tuple(e.v("nshards")))
    if op == "CHUNK":
        return chunk(xs[0], *attrs)
    return concat(xs, attrs[0], tuple(e.v("cshards")))


def _move_rule(op: str, name: str, law: str) -> None:
    def sides(e: Env) -> tuple[Any, Any]:
        xs, a, r = e.ts("xs"), e.v("a"), e.v("r")
        e.require(r in ("sum", "max"), "r is sum or max")
        if op != "CONCAT":
            e.require(len(xs) == 1, f"{op} has one operand")
        return (all_reduce(_move(e, op, xs), a, r),
                _move(e, op, tuple(all_reduce(x, a, r) for x in xs)))
    rule(name, law)(sides)


# sums and maxima over ranks are positionwise: they commute with renaming and block movement
_move_rule("RENAME", "allreduce-rename",
           "ALL_REDUCE(RENAME(x, o, n), a, r) = RENAME(ALL_REDUCE(x, a, r), o, n)")
_move_rule("CHUNK", "allreduce-chunk",
           "ALL_REDUCE(CHUNK(x, d, p, i), a, r) = CHUNK(ALL_REDUCE(x, a, r), d, p, i)")
_move_rule("CONCAT", "allreduce-concat",
           "ALL_REDUCE(CONCAT(xs, d), a, r) = CONCAT(ALL_REDUCE(x, a, r) for x in xs, d)")


# the max over ranks of the max over each block along d is the max over d
@rule("allreduce-max-shard",
      "ALL_REDUCE(REDUCE_MAX(SHARD(x, d, a), dims), a, max) = REDUCE_MAX(x, dims)", "d in dims")
def _ar_max_shard(e: Env) -> tuple[Any, Any]:
    x, d, a, dims = e.t("x"), e.v("d"), e.v("a"), tuple(e.v("dims"))
    e.require(d in dims and a not in e.var(x) and d in e.dims(x), "d in dims")
    return all_reduce(reduce_max(shard(x, d, a), dims), a, "max"), reduce_max(x, dims)


# reductions over two axes commute; the higher-ranked axis goes inside
@rule("allreduce-swap",
      "ALL_REDUCE(ALL_REDUCE(x, a, r), b, r) = ALL_REDUCE(ALL_REDUCE(x, b, r), a, r)",
      "rank(b) > rank(a)")
def _ar_swap(e: Env) -> tuple[Any, Any]:
    x, a, bb, r = e.t("x"), e.v("a"), e.v("b"), e.v("r")
    e.require(r in ("sum", "max") and axis_rank(bb) > axis_rank(a), "rank(b) > rank(a)")
    return all_reduce(all_reduce(x, a, r), bb, r), all_reduce(all_reduce(x, bb, r), a, r)


# gathering the blocks of x is x
@rule("allgather-shard", "ALL_GATHER(SHARD(x, d, a), a, d) = x", "x does not vary over a")
def _ag_shard(e: Env) -> tuple[Any, Any]:
    x, a, d = e.t("x"), e.v("a"), e.v("d")
    e.require(a not in e.var(x) and d in e.dims(x), "x does not vary over a")
    return all_gather(shard(x, d, a), a, d), x


# gathering along d over a commutes with taking a block along another dim over another axis
@rule("allgather-shard-comm",
      "ALL_GATHER(SHARD(x, e, b), a, d) = SHARD(ALL_GATHER(x, a, d), e, b)", "b != a and e != d")
def _ag_comm(e: Env) -> tuple[Any, Any]:
    x, ee, bb, a, d = e.t("x"), e.v("e"), e.v("b"), e.v("a"), e.v("d")
    e.require(bb != a and ee != d and bb not in e.var(x) and ee in e.dims(x), "b != a, e != d")
    return all_gather(shard(x, ee, bb), a, d), shard(all_gather(x, a, d), ee, bb)


# reduce-scatter is the rank's block of the all-reduce (its definition)
@rule("reduce-scatter-def", "REDUCE_SCATTER(x, a, d) = SHARD(ALL_REDUCE(x, a, sum), d, a)")
def _rs_def(e: Env) -> tuple[Any, Any]:
    x, a, d = e.t("x"), e.v("a"), e.v("d")
    return P("REDUCE_SCATTER", (a, d), (x,)), shard(all_reduce(x, a, "sum"), d, a)


# broadcasting a replicated value changes nothing
@rule("broadcast-invariant", "BROADCAST(x, a, src) = x", "x does not vary over a")
def _bc_inv(e: Env) -> tuple[Any, Any]:
    x, a, src = e.t("x"), e.v("a"), e.v("src")
    e.require(a not in e.var(x), "x does not vary over a")
    return P("BROADCAST", (a, src), (x,)), x


# all-to-all is the rank's block (along s) of the gathered tensor (along c): its definition
@rule("all-to-all-def", "ALL_TO_ALL(x, a, s, c) = SHARD(ALL_GATHER(x, a, c), s, a)")
def _a2a_def(e: Env) -> tuple[Any, Any]:
    x, a, sp, cc = e.t("x"), e.v("a"), e.v("s"), e.v("c")
    return P("ALL_TO_ALL", (a, sp, cc), (x,)), shard(all_gather(x, a, cc), sp, a)


# reducing over one axis and gathering over another commute
@rule("allreduce-allgather-comm",
      "ALL_REDUCE(ALL_GATHER(x, b, d), a, r) = ALL_GATHER(ALL_REDUCE(x, a, r), b, d)",
      "a != b; no dim of x is sharded over a")
def _ar_ag_comm(e: Env) -> tuple[Any, Any]:
    x, a, r, bb, d = e.t("x"), e.v("a"), e.v("r"), e.v("b"), e.v("d")
    e.require(a != bb and r in ("sum", "max") and not _blocks_over(e, x, a)
              and d in e.dims(x), "a != b; no dim of x is sharded over a")
    return all_reduce(all_gather(x, bb, d), a, r), all_gather(all_reduce(x, a, r), bb, d)


# ==== permute (rewriting/permute.py: the context-parallel chunk map) ==========================
_GROUP[0] = "permute"


def permute(x: Any, d: str, o: Any) -> P:
    return P("PERMUTE", (d, tuple(o)), (x,))


def _order(o: Any) -> bool:
    return (isinstance(o, tuple) and len(o) >= 1
            and all(isinstance(j, int) and not isinstance(j, bool) for j in o)
            and sorted(o) == list(range(len(o))))


def _perm_ok(e: Env, xs: tuple[int, ...], mask: tuple[bool, ...], d: str) -> bool:
    if len(xs) != len(mask) or not any(mask):
        return False
    spec = None
    for x, m in zip(xs, mask):
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


def _pjoin(xs: tuple[int, ...], mask: tuple[bool, ...], d: str, o: Any) -> tuple[Any, ...]:
    return tuple(permute(x, d, o) if m else x for x, m in zip(xs, mask))


# permutations along different dims commute; the smaller dim name goes outside
@rule("perm-swap", "PERMUTE(PERMUTE(x, d1, o1), d2, o2) = PERMUTE(PERMUTE(x, d2, o2), d1, o1)",
      "d1 < d2 (by name)")
def _perm_swap(e: Env) -> tuple[Any, Any]:
    x, d1, o1, d2, o2 = e.t("x"), e.v("d1"), e.v("o1"), e.v("d2"), e.v("o2")
    e.require(isinstance(d1, str) and isinstance(d2, str) and d1 < d2, "d1 < d2")
    e.require(_order(o1) and _order(o2), "block orders")
    return permute(permute(x, d1, o1), d2, o2), permute(permute(x, d2, o2), d1, o1)


# two permutations of the same blocks are one
@rule("perm-compose", "PERMUTE(PERMUTE(x, d, o1), d, o2) = PERMUTE(x, d, o) with o[j] = o1[o2[j]]",
      "o1 and o2 have the same number of blocks")
def _perm_compose(e: Env) -> tuple[Any, Any]:
    x, d, o1, o2 = e.t("x"), e.v("d"), e.v("o1"), e.v("o2")
    e.require(_order(o1) and _order(o2) and len(o1) == len(o2), "same number of blocks")
    return permute(permute(x, d, o1), d, o2), permute(x, d, tuple(o1[j] for j in o2))


# the identity order moves nothing
@rule("perm-identity", "PERMUTE(x, d, (0, 1, ..., n-1)) = x", "none")
def _perm_identity(e: Env) -> tuple[Any, Any]:
    x, d, n = e.t("x"), e.v("d"), e.v("n")
    e.require(isinstance(n, int) and not isinstance(n, bool) and n >= 1, "n >= 1")
    return permute(x, d, tuple(range(n))), x


# an elementwise op of permuted operands is the permuted op (others lack d)
@rule("lift-perm-elementwise",
      "op(..PERMUTE(x_i, d, o)..y_j..) = PERMUTE(op(..x_i..y_j..), d, o)  (op elementwise)",
      "some operand is PERMUTE(., d, o); those share d's spec; the other operands lack d")
def _lift_perm_ew(e: Env) -> tuple[Any, Any]:
    op, attrs, xs, mask, d, o = e.v("op"), e.v("attrs"), e.ts("xs"), _mask(e), e.v("d"), e.v("o")
    e.require(op in ELEMENTWISE, f"{op} is elementwise")
    e.require(_order(o) and _perm_ok(e, xs, mask, d), "lift condition")
    return P(op, tuple(attrs), _pjoin(xs, mask, d, o)), permute(P(op, tuple(attrs), xs), d, o)


# a contraction that keeps d, of operands permuted along d, is the permuted contraction
@rule("lift-perm-einsum",
      "EINSUM(..PERMUTE(x_i, d, o)..y_j.., out) = PERMUTE(EINSUM(..x_i..y_j.., out), d, o)",
      "d in out, and the lift-perm-elementwise condition")
def _lift_perm_einsum(e: Env) -> tuple[Any, Any]:
    xs, mask, d, o, out = e.ts("xs"), _mask(e), e.v("d"), e.v("o"), tuple(e.v("out"))
    e.require(d in out and _order(o) and _perm_ok(e, xs, mask, d), "d in out and lift condition")
    return einsum(_pjoin(xs, mask, d, o), out), permute(einsum(xs, out), d, o)


# a sum over d does not depend on the order of d's positions
@rule("einsum-perm-contract",
      "EINSUM(..PERMUTE(x_i, d, o)..y_j.., out) = EINSUM(..x_i..y_j.., out)",
      "d not in out; every operand with d is PERMUTE(., d, o) (one o, one spec of d)")
def _perm_contract(e: Env) -> tuple[Any, Any]:
    xs, mask, d, o, out = e.ts("xs"), _mask(e), e.v("d"), e.v("o"), tuple(e.v("out"))
    e.require(d not in out and _order(o) and _perm_ok(e, xs, mask, d),
              "d not in out and lift condition")
    return einsum(_pjoin(xs, mask, d, o), out), einsum(xs, out)


def _pwf(e: Env, x: int, d: str, o: Any) -> bool:
    return _order(o) and d in e.dims(x)


# max over other dims commutes with the permutation of d
@rule("lift-perm-reduce-max",
      "REDUCE_MAX(PERMUTE(x, d, o), dims) = PERMUTE(REDUCE_MAX(x, dims), d, o)", "d not in dims")
def _lift_perm_rmax(e: Env) -> tuple[Any, Any]:
    x, d, o, dims = e.t("x"), e.v("d"), e.v("o"), tuple(e.v("dims"))
    e.require(d not in dims and _pwf(e, x, d, o), "d not in dims")
    return reduce_max(permute(x, d, o), dims), permute(reduce_max(x, dims), d, o)


# top-k along e acts on each position of the other dims alone: it commutes with a
# permutation of another dim
@rule("lift-perm-topk",
      "TOPK_MASK(PERMUTE(x, d, o), e, k) = PERMUTE(TOPK_MASK(x, e, k), d, o)", "d != e")
def _lift_perm_topk(e: Env) -> tuple[Any, Any]:
    x, d, o, ee, k = e.t("x"), e.v("d"), e.v("o"), e.v("e"), e.v("k")
    e.require(d != ee and _pwf(e, x, d, o), "d != e")
    return (P("TOPK_MASK", (ee, k), (permute(x, d, o),)),
            permute(P("TOPK_MASK", (ee, k), (x,)), d, o))


@rule("lift-perm-topk-elig",
      "TOPK_MASK(PERMUTE(x, d, o), PERMUTE(el, d, o), e, k) = PERMUTE(TOPK_MASK(x, el, e, k), d, o)",
      "d != e")
def _lift_perm_topk_elig(e: Env) -> tuple[Any, Any]:
    x, el, d, o, ee, k = e.t("x"), e.t("el"), e.v("d"), e.v("o"), e.v("e"), e.v("k")
    e.require(d != ee and _pwf(e, x, d, o) and _pwf(e, el, d, o), "d != e")
    return (P("TOPK_MASK", (ee, k), (permute(x, d, o), permute(el, d, o))),
            permute(P("TOPK_MASK", (ee, k), (x, el)), d, o))


# a max over d does not depend on the order of d's positions
@rule("reduce-max-perm", "REDUCE_MAX(PERMUTE(x, d, o), dims) = REDUCE_MAX(x, dims)", "d in dims")
def _perm_rmax(e: Env) -> tuple[Any, Any]:
    x, d, o, dims = e.t("x"), e.v("d"), e.v("o"), tuple(e.v("dims"))
    e.require(d in dims and _pwf(e, x, d, o), "d in dims")
    return reduce_max(permute(x, d, o), dims), reduce_max(x, dims)


# renaming commutes with the permutation (the permuted dim is renamed with it)
@rule("lift-perm-rename",
      "RENAME(PERMUTE(x, d, o), old, new) = PERMUTE(RENAME(x, old, new), d', o)  (d' = new if d = old)",
      "the output spec of new is nshards; if d = old, nshards is x's spec of d")
def _lift_perm_rename(e: Env) -> tuple[Any, Any]:
    x, d, o, old, new = e.t("x"), e.v("d"), e.v("o"), e.v("old"), e.v("new")
    nsh = tuple(e.v("nshards"))
    e.require(_pwf(e, x, d, o), "x has d")
    if d == old:
        e.require(nsh == e.dims(x)[d], "nshards is x's spec of d")
    d2 = new if d == old else d
    return rename(permute(x, d, o), old, new, nsh), permute(rename(x, old, new, nsh), d2, o)


# a chunk along another dim commutes with the permutation
@rule("lift-perm-chunk",
      "CHUNK(PERMUTE(x, d, o), c, parts, i) = PERMUTE(CHUNK(x, c, parts, i), d, o)", "c != d")
def _lift_perm_chunk(e: Env) -> tuple[Any, Any]:
    x, d, o, cd, parts, i = (e.t("x"), e.v("d"), e.v("o"), e.v("cd"), e.v("parts"),
                             e.v("index"))
    e.require(cd != d and _pwf(e, x, d, o), "c != d")
    return chunk(permute(x, d, o), cd, parts, i), permute(chunk(x, cd, parts, i), d, o)


# concatenating permuted blocks along another dim is the permuted concatenation
@rule("lift-perm-concat", "CONCAT(PERMUTE(x_i, d, o)..., c) = PERMUTE(CONCAT(x_i..., c), d, o)",
      "c != d; every operand is PERMUTE(., d, o) with the same spec of d")
def _lift_perm_concat(e: Env) -> tuple[Any, Any]:
    xs, d, o, cd, csh = e.ts("xs"), e.v("d"), e.v("o"), e.v("cd"), tuple(e.v("cshards"))
    e.require(cd != d and _order(o) and _perm_ok(e, xs, (True,) * len(xs), d),
              "c != d and lift condition")
    return (concat(tuple(permute(x, d, o) for x in xs), cd, csh),
            permute(concat(xs, cd, csh), d, o))


# one-hot is positionwise in the indices
@rule("lift-perm-onehot", "ONE_HOT(PERMUTE(idx, d, o), v) = PERMUTE(ONE_HOT(idx, v), d, o)",
      "d != v")
def _lift_perm_onehot(e: Env) -> tuple[Any, Any]:
    x, d, o, v, sh = e.t("x"), e.v("d"), e.v("o"), e.v("v"), tuple(e.v("vshards"))
    e.require(d != v and _pwf(e, x, d, o), "d != v")
    return one_hot(permute(x, d, o), v, sh), permute(one_hot(x, v, sh), d, o)


# a permutation along d commutes with taking a block along another dim (on every rank)
@rule("lift-shard-permute", "PERMUTE(SHARD(x, e, a), d, o) = SHARD(PERMUTE(x, d, o), e, a)",
      "e != d")
def _lift_shard_perm(e: Env) -> tuple[Any, Any]:
    x, ee, a, d, o = e.t("x"), e.v("e"), e.v("a"), e.v("d"), e.v("o")
    e.require(ee != d and _order(o), "e != d")
    return permute(shard(x, ee, a), d, o), shard(permute(x, d, o), ee, a)


# a collective over ranks commutes with a permutation every rank applies
@rule("allreduce-permute",
      "ALL_REDUCE(PERMUTE(x, d, o), a, r) = PERMUTE(ALL_REDUCE(x, a, r), d, o)",
      "r in {sum, max}")
def _ar_perm(e: Env) -> tuple[Any, Any]:
    x, d, o, a, r = e.t("x"), e.v("d"), e.v("o"), e.v("a"), e.v("r")
    e.require(r in ("sum", "max") and _pwf(e, x, d, o), "r in {sum, max}")
    return all_reduce(permute(x, d, o), a, r), permute(all_reduce(x, a, r), d, o)


# ==== exp-shift (rewriting/expshift.py: max shifts of exp, online softmax) ====================
_GROUP[0] = "exp-shift"


def _is_max_node(e: Env, m: int) -> bool:
    while e.op(m) in ("SHARD", "PERMUTE"):
        m = e.args(m)[0]
    return e.op(m) in ("REDUCE_MAX", "MAXIMUM") or (e.op(m) == "ALL_REDUCE"
                                                     and e.attrs(m)[1] == "max")


def _max_factor(e: Env, f: int) -> bool:
    if e.op(f) == "POW":
        f = e.args(f)[0]
    return e.op(f) == "EXP" and _is_max_node(e, e.args(f)[0])


# exp(y) = exp(y - c m) * exp(m)^c: the max shift becomes a separate factor
@rule("exp-max-shift", "EXP(y) = MUL(EXP(ADD(y, MUL(CONST(-c), m))), POW(EXP(m), c))",
      "m is a max (REDUCE_MAX, MAXIMUM, ALL_REDUCE max; under PERMUTE/SHARD) with negative "
      "integer coefficient c in y read as a linear combination, and y has another term")
def _exp_max_shift(e: Env) -> tuple[Any, Any]:
    y, m, c = e.t("y"), e.t("m"), num(e.v("c"))
    e.require(isinstance(c, Fraction) and c.denominator == 1 and c < 0, "c a negative integer")
    e.require(_is_max_node(e, m), "m is a max")
    e.require(e.dimnames(m) <= e.dimnames(y), "m's dims are y's (m is a term of y)")
    return (P("EXP", (), (y,)),
            mul(P("EXP", (), (add(y, mul(const(-c), m)),)), pow_(P("EXP", (), (m,)), c)))


# a factor constant along every contracted dim leaves the contraction
@rule("einsum-max-factor-out",
      "EINSUM(..f.., out) = MUL(f, EINSUM(.. .., out'))  (out' = out restricted to the rest)",
      "f = EXP(m) or POW(EXP(m), c) with m a max; f's dims are in out; another operand remains")
def _einsum_max_factor(e: Env) -> tuple[Any, Any]:
    f, k, rest, out = e.t("f"), e.v("k"), e.ts("rest"), tuple(e.v("out"))
    e.require(_max_factor(e, f), "f is a max factor")
    e.require(bool(rest) and isinstance(k, int) and not isinstance(k, bool)
              and 0 <= k <= len(rest), "another operand remains")
    e.require(e.dimnames(f) <= set(out), "f's dims are in out")
    have = e.dimnames(rest)
    xs = list(rest)
    xs.insert(k, f)
    return einsum(tuple(xs), out), mul(f, einsum(tuple(rest), [n for n in out if n in have]))


# a max factor shared by every summand leaves the sum
@rule("add-max-factor-out", "ADD(MUL(.., f, ..), ...) = MUL(f, ADD(MUL(.. ..), ...))",
      "f = EXP(m) or POW(EXP(m), c) with m a max is a factor of every summand (at least two)")
def _add_max_factor(e: Env) -> tuple[Any, Any]:
    f, xs = e.t("f"), e.ts("xs")
    e.require(_max_factor(e, f) and len(xs) >= 2, "f is a max factor, two summands")
    outs: list[Any] = []
    for x in xs:
        e.require(e.op(x) == "MUL" and f in e.args(x), "f is a factor of every summand")
        a = list(e.args(x))
        a.remove(f)
        outs.append(a[0] if len(a) == 1 else mul(*a))
    return add(*xs), mul(f, add(*outs))


# 1 / (a sum) is constant along the contracted dims: softmax's normaliser leaves p @ v
@rule("einsum-recip-factor-out",
      "EINSUM(..f.., out) = MUL(f, EINSUM(.. .., out'))  (f = POW(EINSUM(..), e), e < 0)",
      "f's dims are in out; another operand has a contracted dim")
def _einsum_recip_factor(e: Env) -> tuple[Any, Any]:
    f, k, rest, out = e.t("f"), e.v("k"), e.ts("rest"), tuple(e.v("out"))
    e.require(e.op(f) == "POW" and e.op(e.args(f)[0]) == "EINSUM"
              and num(e.attrs(f)[0]) < 0, "f = POW(EINSUM(..), e), e < 0")
    e.require(bool(rest) and isinstance(k, int) and not isinstance(k, bool)
              and 0 <= k <= len(rest), "another operand remains")
    e.require(e.dimnames(f) <= set(out), "f's dims are in out")
    have = e.dimnames(rest)
    e.require(any(n not in out for n in have), "another operand has a contracted dim")
    xs = list(rest)
    xs.insert(k, f)
    return einsum(tuple(xs), out), mul(f, einsum(tuple(rest), [n for n in out if n in have]))


def _wrap_pat(e: Env, ws: Any, y: Any) -> Any:
    e.require(isinstance(ws, tuple) and len(ws) >= 1, "W is a non-empty chain")
    for w in reversed(ws):
        e.require(isinstance(w, tuple) and len(w) == 3 and w[0] in ("SHARD", "PERMUTE"),
                  "W is a chain of SHARD / PERMUTE")
        y = shard(y, w[1], w[2]) if w[0] == "SHARD" else permute(y, w[1], w[2])
    return y


# the same shift when the scaled max is a rank's block or in load-balanced order
@rule("exp-max-shift-block",
      "EXP(ADD(xs)) = MUL(EXP(ADD(xs without x_k)), POW(EXP(W(m)), c))  (x_k = W(MUL(CONST(c), m)))",
      "W is a non-empty chain of SHARD / PERMUTE; m is a max; c a negative integer")
def _exp_max_shift_block(e: Env) -> tuple[Any, Any]:
    xs, k, ws, c, m = e.ts("xs"), e.v("k"), e.v("ws"), num(e.v("c")), e.t("m")
    e.require(isinstance(k, int) and not isinstance(k, bool) and 0 <= k < len(xs)
              and len(xs) >= 2, "x_k is a summand of at least two")
    e.require(isinstance(c, Fraction) and c.denominator == 1 and c < 0, "c a negative integer")
    e.require(_is_max_node(e, m), "m is a max")
    _match(_wrap_pat(e, ws, mul(const(c), m)), xs[k], e.tab, "x_k")
    rest = xs[:k] + xs[k + 1:]
    y = rest[0] if len(rest) == 1 else add(*rest)
    return (P("EXP", (), (add(*xs),)),
            mul(P("EXP", (), (y,)), pow_(P("EXP", (), (_wrap_pat(e, ws, m),)), c)))


# ==== the table ================================================================================
RULES: dict[str, Rule] = {r.name: r for r in _RULES}


def ruleset_sha256(rows: list[tuple[str, str, str, str]]) -> str:
    """sha256 of the ``[name, group, law, guard]`` rows in priority order (as the producer's
    ``rewriting.RULESET``): any added, removed, reordered or reworded rule changes it."""
    return hashlib.sha256(json.dumps([list(r) for r in rows], separators=(",", ":"))
                          .encode()).hexdigest()


RULESET: dict[str, str] = {
    "name": "tensor",
    "version": "2",
    "sha256": ruleset_sha256([(r.name, r.group, r.law, r.guard_doc) for r in _RULES]),
}


def varying_table(table: NodeTable) -> list[frozenset[str]]:
    """Mesh axes each node varies over (as ``spec_lang.term.varying_axes``; stricter for a
    ``ONE_HOT`` whose output dim is sharded: it varies over those axes)."""
    out: list[frozenset[str]] = []
    for op, args, attrs, dims in table.nodes:
        v: set[str] = set()
        for c in args:
            v |= out[c]
        if op in ("SHARD",):
            v.add(attrs[1])
        elif op in ("PART", "RANK_CONST", "REDUCE_SCATTER", "ALL_TO_ALL"):
            v.add(attrs[0])
        elif op in ("ALL_REDUCE", "ALL_GATHER", "BROADCAST"):
            v.discard(attrs[0])
        elif op == "ONE_HOT":
            v |= {a for n, s in dims if n == attrs[0] for a in s if not a.startswith("#")}
        out.append(frozenset(v))
    return out


def instantiate_and_match(rule_: Rule, subst: Mapping[str, tuple[str, Any]], table: NodeTable,
                          binding: Mapping[str, int], lhs: int, rhs: int,
                          varying: list[frozenset[str]], signs: Signs | None = None) -> None:
    """Check that ``lhs -> rhs`` is an instance of ``rule_`` under ``subst`` whose guard holds;
    ``signs``: the sign facts definedness guards consult (default: the input domains alone).

    Raises:
        RuleMismatch: naming the first difference or the failing guard.
    """
    env = Env(subst, table, binding, lambda i: varying[i], signs)
    try:
        lp, rp = rule_.sides(env)
        _match(lp, lhs, table, "lhs")
        _match(rp, rhs, table, "rhs")
    except RuleMismatch:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, ZeroDivisionError) as e:
        raise RuleMismatch(f"{type(e).__name__}: {e}") from None
