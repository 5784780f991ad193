"""Canonical forms: rules that rewrite ops into one representation (no SHARD, no collectives).

* dims listed by name, ``EINSUM`` operands sorted by structural key and ``out_dims`` sorted;
* ``NEG x = -1 * x``, ``RECIP x = x^-1``, ``SQRT x = x^(1/2)``, ``RSQRT x = x^(-1/2)``;
  ``CAST`` and ``STOP_GRAD`` removed (identities over the reals, forward meaning);
  ``DIM_SIZE``/``AXIS_SIZE`` become the binding's integers;
* powers: ``x^1 = x``, constants folded exactly, ``(x^a)^b = x^(ab)``, integer powers of
  products distributed.

Sums and products (``ADD``/``MUL`` n-ary, flat, sorted, merged) are in ``polynomial.py``,
canonical contractions (``EINSUM``) in ``contraction.py``.

**Definedness.** A rewrite must not change where a term is defined on the spec's domain: ``(x^-1)^-1
= x`` only where ``x != 0``, ``(x^(1/2))^2 = x`` only where ``x >= 0`` (``rewriting/signs.py``
derives the signs from the declared input domains; the checker recomputes them). Radicands and
denominators of the *spec* are nonzero where the spec is defined; the prover lists the ones the
input domains do not settle with every verdict.
"""

from __future__ import annotations

from fractions import Fraction

from spec_lang.term import LEAF, Binding, Op, Term, term

from rewriting import build as b
from rewriting.instances import draw_binding, draw_const, draw_dims, fresh, nonzero_base
from rewriting.rule import Draw, Rule, Subst, always, register
from rewriting.signs import pow_pow_keeps_definedness, signs_for

__all__ = ["lin", "mono", "canon_mul", "dimnames"]


def _rule(name: str, law: str, guard_doc: str, ops: set[Op], match, lhs, rhs, guard=always,
          sample=None) -> Rule:
    return register(Rule(name, law, guard_doc, frozenset(ops), match, lhs, rhs, guard, sample,
                         group="canonical"))


# ---------------------------------------------------------------------------------------------
# dims-sort: a node's dims in storage order carry no meaning; list them by name.
_DIMS_SORT_OPS = set(Op) - set(LEAF) - {Op.EINSUM, Op.REGION}


def _is_sorted(t: Term) -> bool:
    prev = ""
    for d in t.dims:
        if d.name < prev:
            return False
        prev = d.name
    return True


def _sample_dims_sort(draw: Draw) -> tuple[Term, Binding]:
    x = fresh(["S", "B"])
    return term(Op.EXP, (x,), (), x.dims), draw_binding(draw)


DIMS_SORT = _rule(
    "dims-sort", "t = t with its dims listed by name (storage order is not meaning)",
    "t is not a leaf or EINSUM and its dims are not sorted by name", _DIMS_SORT_OPS,
    match=lambda t, bd: None if _is_sorted(t) else {"t": t},
    lhs=lambda s: s["t"],
    rhs=lambda s, bd: term(s["t"].op, s["t"].args, s["t"].attrs, b.sort_dims(s["t"].dims)),
    guard=lambda s, bd: s["t"].op in _DIMS_SORT_OPS and not _is_sorted(s["t"]),
    sample=_sample_dims_sort)


# ---------------------------------------------------------------------------------------------
# Ops that are another op in canonical form.
def _unary_rule(name: str, op: Op, law: str, rhs, sample_dims=("B", "H")) -> Rule:
    def sample(draw: Draw) -> tuple[Term, Binding]:
        x = fresh(list(sample_dims), domain="positive")
        return b.unary(op, x), draw_binding(draw)

    return _rule(name, law, "", {op},
                 match=lambda t, bd: {"x": t.args[0]},
                 lhs=lambda s: b.unary(op, s["x"]),
                 rhs=lambda s, bd: rhs(s["x"]),
                 sample=sample)


# STOP_GRAD is the identity forward (gradients were taken before normalisation)
_unary_rule("stop-grad-elim", Op.STOP_GRAD, "STOP_GRAD(x) = x", lambda x: x)
# NEG x = (-1) * x
_unary_rule("neg-mul", Op.NEG, "NEG(x) = MUL(CONST(-1), x)", lambda x: b.mul(b.const(-1), x))
# 1/x = x^-1
_unary_rule("recip-pow", Op.RECIP, "RECIP(x) = POW(x, -1)", lambda x: b.pow_(x, -1))
# sqrt x = x^(1/2)
_unary_rule("sqrt-pow", Op.SQRT, "SQRT(x) = POW(x, 1/2)", lambda x: b.pow_(x, Fraction(1, 2)))
# 1/sqrt x = x^(-1/2)
_unary_rule("rsqrt-pow", Op.RSQRT, "RSQRT(x) = POW(x, -1/2)",
            lambda x: b.pow_(x, Fraction(-1, 2)))


def _sample_cast(draw: Draw) -> tuple[Term, Binding]:
    return b.elementwise(Op.CAST, [fresh(["B", "H"])], ["bf16"]), draw_binding(draw)


# CAST is the identity over the reals (the precision lint reads casts before normalisation)
_rule("cast-elim", "CAST(x, dtype) = x", "", {Op.CAST},
      match=lambda t, bd: {"x": t.args[0], "dtype": t.attrs[0]},
      lhs=lambda s: b.elementwise(Op.CAST, [s["x"]], [s["dtype"]]),
      rhs=lambda s, bd: s["x"], sample=_sample_cast)


def _size_rule(name: str, op: Op, law: str, key: str) -> Rule:
    def sample(draw: Draw) -> tuple[Term, Binding]:
        bd = draw_binding(draw)
        v = draw.choice(["B", "H"] if op is Op.DIM_SIZE else ["dp", "tp", "mb"])
        return term(op, (), (v,), ()), bd

    return _rule(name, law, f"{key} is bound", {op},
                 match=lambda t, bd: {key: t.attrs[0]} if t.attrs[0] in bd else None,
                 lhs=lambda s: term(op, (), (s[key],), ()),
                 rhs=lambda s, bd: b.const(bd[s[key]]),
                 guard=lambda s, bd: s[key] in bd, sample=sample)


# sizes are the binding's integers (guards and constants use real sizes)
_size_rule("dim-size", Op.DIM_SIZE, "DIM_SIZE(d) = CONST(size(d))", "d")
_size_rule("axis-size", Op.AXIS_SIZE, "AXIS_SIZE(a) = CONST(|a|)", "a")


def _uniform(t: Term) -> bool:
    vals = t.attrs[1]
    return len(vals) > 0 and all(b.num(v) == b.num(vals[0]) for v in vals)


def _sample_rank_const(draw: Draw) -> tuple[Term, Binding]:
    bd = draw_binding(draw)
    a = draw.choice(["dp", "tp"])
    v = Fraction(draw.int(-5, 5), draw.int(1, 4))
    return term(Op.RANK_CONST, (), (a, (v,) * bd[a]), ()), bd


# a per-rank constant with the same value on every coordinate is a constant
_rule("rank-const-uniform", "RANK_CONST(a, (v, ..., v)) = CONST(v)",
      "every value equals the first and there are |a| of them", {Op.RANK_CONST},
      match=lambda t, bd: ({"a": t.attrs[0], "values": t.attrs[1]}
                           if _uniform(t) and t.attrs[0] in bd and len(t.attrs[1]) == bd[t.attrs[0]]
                           else None),
      lhs=lambda s: term(Op.RANK_CONST, (), (s["a"], s["values"]), ()),
      rhs=lambda s, bd: b.const(s["values"][0]),
      guard=lambda s, bd: (len(s["values"]) == bd[s["a"]]
                           and all(b.num(v) == b.num(s["values"][0]) for v in s["values"])),
      sample=_sample_rank_const)


# ---------------------------------------------------------------------------------------------
# POW
def _sample_pow_one(draw: Draw) -> tuple[Term, Binding]:
    return b.pow_(fresh(["B"]), 1), draw_binding(draw)


# x^1 = x
_rule("pow-one", "POW(x, 1) = x", "", {Op.POW},
      match=lambda t, bd: {"x": t.args[0]} if t.attrs[0] == 1 else None,
      lhs=lambda s: b.pow_(s["x"], 1), rhs=lambda s, bd: s["x"], sample=_sample_pow_one)


def _pow_const_ok(s: Subst, bd: Binding) -> bool:
    return b.pow_is_real(b.num(s["c"]), s["e"])


def _sample_pow_const(draw: Draw) -> tuple[Term, Binding]:
    c = Fraction(draw.int(1, 9), draw.int(1, 4))
    e = Fraction(draw.choice([-2, -1, 1, 2, 3]), draw.choice([1, 2]))
    return b.pow_(b.const(c), e), draw_binding(draw)


# c^e folded exactly (sympy for irrational results)
_rule("pow-const", "POW(CONST(c), e) = CONST(c^e)",
      "c^e is real and defined: c > 0, or e an integer and (c != 0 or e > 0)", {Op.POW},
      match=lambda t, bd: ({"c": t.args[0].attrs[0], "e": t.attrs[0]}
                           if t.args[0].op is Op.CONST
                           and b.pow_is_real(b.num(t.args[0].attrs[0]), t.attrs[0])
                           and b.certifiable(b.num_pow(b.num(t.args[0].attrs[0]), t.attrs[0]))
                           else None),
      lhs=lambda s: b.pow_(b.const(s["c"]), s["e"]),
      rhs=lambda s, bd: b.const(b.num_pow(b.num(s["c"]), s["e"])),
      guard=_pow_const_ok, sample=_sample_pow_const)


def _pow_pow_ok(s: Subst, bd: Binding) -> bool:
    a, e = Fraction(s["a"]), Fraction(s["b"])
    return ((e.denominator == 1 or a.numerator % 2 == 1)
            and pow_pow_keeps_definedness(s["x"], a, e, signs_for(bd)))


def _match_pow_pow(t: Term, bd: Binding) -> Subst | None:
    x = t.args[0]
    if x.op is not Op.POW:
        return None
    s = {"x": x.args[0], "a": x.attrs[0], "b": t.attrs[0]}
    return s if _pow_pow_ok(s, bd) else None


def _sample_pow_pow(draw: Draw) -> tuple[Term, Binding]:
    a = Fraction(draw.choice([-1, 1, 3, 2]), draw.choice([1, 2]))
    e = Fraction(draw.choice([-2, -1, 2, 3]), 1) if a.numerator % 2 == 0 else \
        Fraction(draw.choice([-1, 1, 3]), draw.choice([1, 2]))
    # integer powers of a nonzero base keep definedness; fractional ones need a positive base
    x = nonzero_base(draw, ["B"]) if a.denominator == e.denominator == 1 else \
        fresh(["B"], domain="positive")
    return b.pow_(b.pow_(x, a), e), draw_binding(draw)


# (x^a)^b = x^(ab) where x^a is defined, unless that would drop a sign: (x^2)^(1/2) = |x|,
# or change where it is defined: (x^-1)^-1 = x needs x != 0, (x^(1/2))^2 = x needs x >= 0
_rule("pow-pow", "POW(POW(x, a), b) = POW(x, a*b)",
      "b is an integer, or a's numerator is odd; both sides defined at the same inputs of the "
      "spec's domain (rewriting/signs.py)", {Op.POW},
      match=_match_pow_pow,
      lhs=lambda s: b.pow_(b.pow_(s["x"], s["a"]), s["b"]),
      rhs=lambda s, bd: b.pow_(s["x"], Fraction(s["a"]) * Fraction(s["b"])),
      guard=_pow_pow_ok, sample=_sample_pow_pow)


def _match_pow_mul(t: Term, bd: Binding) -> Subst | None:
    x, e = t.args[0], Fraction(t.attrs[0])
    if x.op is not Op.MUL or e.denominator != 1:
        return None
    return {"xs": x.args, "e": t.attrs[0]}


def _pow_mul_rhs(s: Subst, bd: Binding) -> Term:
    return b.mul(*[b.pow_(x, s["e"]) for x in s["xs"]])


def _sample_pow_mul(draw: Draw) -> tuple[Term, Binding]:
    dims = draw_dims(draw)
    m = b.mul(draw_const(draw), fresh(dims, domain="positive"), fresh(dims[:1]))
    return b.pow_(m, draw.choice([-2, -1, 2, 3])), draw_binding(draw)


# an integer power of a product is the product of the powers (constants fold next)
_rule("pow-mul", "POW(MUL(xs), n) = MUL(POW(x, n) for x in xs)", "n is an integer", {Op.POW},
      match=_match_pow_mul, lhs=lambda s: b.pow_(b.mul(*s["xs"]), s["e"]), rhs=_pow_mul_rhs,
      guard=lambda s, bd: Fraction(s["e"]).denominator == 1, sample=_sample_pow_mul)


# ADD / MUL canonical forms (registered here, after POW: the rule order is the priority order)
from rewriting.polynomial import canon_mul, dimnames, lin, mono  # noqa: E402
