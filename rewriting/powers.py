"""Fractional powers of a product with a positive constant factor (issue 12, item 1).

``pow-mul`` splits an *integer* power of a product. A fractional power of a product does not
split in general (``(x y)^(1/2) != x^(1/2) y^(1/2)`` when both are negative), but a positive
constant factor always leaves it: ``(c y)^e = c^e y^e`` for ``c > 0`` wherever the left side is
defined (``c y >= 0``, so ``y >= 0``). A variance written by hand as ``sum(c * c) * (1/n)`` is
``MUL(1/n, ...)`` under a square root while the library's ``mean`` folds ``1/n`` elsewhere; with
this rule ``rsqrt(var + eps)`` and ``1 / sqrt(var + eps)`` share one normal form in value and
gradient (the LayerNorm-by-hand spelling of ``rewriting/spellings.py``).
"""

from __future__ import annotations

from fractions import Fraction

from spec_lang.term import Binding, Op, Term

from rewriting import build as b
from rewriting.instances import draw_binding, draw_dims, fresh
from rewriting.rule import Draw, Rule, Subst, register

__all__: list[str] = []


def _rule(name: str, law: str, guard_doc: str, ops: set[Op], match, lhs, rhs, guard,
          sample) -> Rule:
    return register(Rule(name, law, guard_doc, frozenset(ops), match, lhs, rhs, guard, sample,
                         group="canonical"))


def _positive(v) -> bool:
    n = b.num(v)
    return bool(n > 0) if isinstance(n, Fraction) else bool(b._sym(n) > 0)  # noqa: SLF001


def _ok(s: Subst, bd: Binding) -> bool:
    xs, k, e = s["xs"], s["k"], Fraction(s["e"])
    return (e.denominator != 1 and len(xs) >= 2 and 0 <= k < len(xs)
            and xs[k].op is Op.CONST and _positive(xs[k].attrs[0]))


def _match(t: Term, bd: Binding) -> Subst | None:
    x = t.args[0]
    if x.op is not Op.MUL:
        return None
    for k, y in enumerate(x.args):
        s = {"xs": x.args, "k": k, "e": t.attrs[0]}
        if y.op is Op.CONST and _ok(s, bd):
            return s
    return None


def _rhs(s: Subst, bd: Binding) -> Term:
    xs, k, e = s["xs"], s["k"], Fraction(s["e"])
    rest = xs[:k] + xs[k + 1:]
    inner = rest[0] if len(rest) == 1 else b.mul(*rest)
    return b.mul(b.const(b.num_pow(b.num(xs[k].attrs[0]), e)), b.pow_(inner, e))


def _sample(draw: Draw) -> tuple[Term, Binding]:
    dims = draw_dims(draw)
    c = b.const(Fraction(draw.int(1, 9), draw.int(1, 6)))
    y = fresh(dims, domain="positive")
    xs = [c, y] if draw.bool() else [c, y, fresh(dims[:1], domain="positive")]
    return b.pow_(b.mul(*xs), Fraction(draw.choice([-3, -1, 1, 3]), 2)), draw_binding(draw)


# a positive constant leaves a fractional power: (c y)^e = c^e y^e, c > 0
_rule("pow-const-factor", "POW(MUL(.., CONST(c), ..), e) = MUL(CONST(c^e), POW(MUL(..  ..), e))",
      "e is not an integer and c > 0", {Op.POW}, match=_match,
      lhs=lambda s: b.pow_(b.mul(*s["xs"]), s["e"]), rhs=_rhs, guard=_ok, sample=_sample)
