"""``proofs.smt._cancels``: a difference whose monomials cancel over opaque atoms is 0.

It runs in the checker (``build_query`` drops an element whose difference cancels, so no z3
query is asked for it): it must never call a nonzero difference 0 (soundness, checked by exact
evaluation at random rational points), and it must catch products nested differently on the
two sides, which ``simplify(som=True)`` leaves uncancelled (the completeness case of
``tests/bugs/test_schedules.py::test_prefix_average_before_a_full_average_is_harmless``).
"""

from __future__ import annotations

from fractions import Fraction

import z3
from hypothesis import given
from hypothesis import strategies as st

from proofs.smt import _cancels

X, Y, Z = z3.Reals("x y z")
F = z3.Function("tanh", z3.RealSort(), z3.RealSort())
ATOMS = [X, Y, Z, F(X), F(X + Y), 1 / (X * X + 1), z3.If(X > Y, X, Y)]


def _expr(draw, depth: int) -> z3.ArithRef:
    kind = draw(st.integers(0, 4 if depth else 1))
    if kind == 0:
        return ATOMS[draw(st.integers(0, len(ATOMS) - 1))]
    if kind == 1:
        return z3.RealVal(Fraction(draw(st.integers(-3, 3)), draw(st.integers(1, 3))))
    a, b = _expr(draw, depth - 1), _expr(draw, depth - 1)
    return {2: a + b, 3: a * b, 4: a - b}[kind]


@st.composite
def expressions(draw) -> z3.ArithRef:
    return _expr(draw, draw(st.integers(1, 4)))


def _value(e: z3.ArithRef, point: tuple[int, int, int]) -> Fraction:
    """``e`` at ``(x, y, z) = point`` with ``tanh`` read as ``t -> t**3 - 2t + 1`` (any
    interpretation must do: the atoms are opaque to ``_cancels``)."""
    v0 = z3.Var(0, z3.RealSort())
    e = z3.substitute_funs(e, (F, v0 * v0 * v0 - 2 * v0 + 1))
    subst = [(v, z3.RealVal(p)) for v, p in zip((X, Y, Z), point)]
    return z3.simplify(z3.substitute(e, *subst)).as_fraction()


@given(expressions(), expressions(), st.lists(st.tuples(*[st.integers(-5, 5)] * 3),
                                              min_size=3, max_size=3))
def test_a_cancelling_difference_is_zero_at_every_point(e1, e2, points):
    d = z3.simplify(e1 - e2, som=True)
    if _cancels(d):
        for p in points:
            assert _value(e1, p) == _value(e2, p), (e1, e2, p)


@given(expressions(), expressions(), expressions())
def test_products_nested_differently_cancel(a, b, c):
    # (a*b)*c*2 - (c*(b*a) + a*(c*b)), with a, b, c arbitrary sums of atoms
    lhs = 2 * ((a * b) * c)
    rhs = c * (b * a) + a * (c * b)
    d = z3.simplify(lhs - rhs, som=True)
    assert (z3.is_rational_value(d) and d.as_fraction() == 0) or _cancels(d)


def test_a_nonzero_difference_does_not_cancel():
    for d in [X, X - Y, F(X) - F(Y), 2 * X * F(X) - X * F(X), 1 / (X * X + 1) - 1,
              X * Y - Y * Z, z3.If(X > Y, X, Y) - X]:
        assert not _cancels(z3.simplify(d, som=True)), d
    assert _cancels(z3.simplify(X * F(X) * 3 - F(X) * X * 3, som=False))
    # atoms are identified by their AST: tanh(x + y) and tanh(y + x) are kept apart unless
    # z3 normalises the arguments to one AST
    assert not _cancels(F(X + Y) - F(X + 2 * Y))
