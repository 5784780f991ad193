"""Builders: canonical dims order, exact constants, the structural key, cached varying axes."""

from __future__ import annotations

from fractions import Fraction

import pytest
import sympy

from rewriting import build as b
from rewriting.instances import draw_binding
from rewriting.rule import RULES
from spec_lang.term import TermError, term, varying_axes, walk

from rw_helpers import RandomDraw


def test_varying_matches_spec_lang_on_every_rule_instance():
    for r in RULES:
        for seed in range(3):
            lhs, bd = r.sample(RandomDraw(seed))
            rhs = r.rhs(r.match(lhs, bd), bd)
            for n in walk([lhs, rhs]):
                fresh = term(n.op, n.args, n.attrs, n.dims)  # same node: cached either way
                assert b.varying(fresh) == varying_axes(fresh)


def test_constants_are_exact():
    assert b.num(3) == Fraction(3) and isinstance(b.num(sympy.Rational(1, 2)), Fraction)
    with pytest.raises(TermError):
        b.num(0.5)
    assert b.num_pow(Fraction(4), Fraction(1, 2)) == 2
    assert b.num_mul(sympy.sqrt(2), sympy.sqrt(2)) == 2
    assert not b.pow_is_real(Fraction(-4), Fraction(1, 2))


def test_dims_are_sorted_and_order_independent():
    x, y = b.inp("bx", ["S", "B"]), b.inp("by", ["H"])
    assert b.add(x, y).dim_names == ("B", "H", "S")
    assert b.einsum([x, y], ["S", "H"]) is b.einsum([x, y], ["H", "S"])


def test_structural_key_ignores_creation_order():
    draw = RandomDraw(1)
    draw_binding(draw)
    k1 = b.skey(b.add(b.inp("k1", ["B"]), b.const(2)))
    assert k1 == b.skey(b.add(b.inp("k1", ["B"]), b.const(2)))
    assert k1 != b.skey(b.add(b.inp("k2", ["B"]), b.const(2)))
    assert b.axis_rank("dp") < b.axis_rank("tp") < b.axis_rank("mb") < b.axis_rank("zz")
