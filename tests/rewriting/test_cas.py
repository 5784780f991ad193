"""Exact scalar residues: rational identities of atoms are proved, non-identities are not."""

from __future__ import annotations

from fractions import Fraction

import pytest

from rewriting import build as b
from rewriting import normalise
from rewriting.cas import cas_equal
from spec_lang.term import Binding, Op

BD = Binding({"B": 4, "H": 4})
x, y = b.inp("cx", ["B", "H"]), b.inp("cy", ["B", "H"])
s = b.einsum([x], ["B"])  # an atom (a row sum)
q = b.inp("cq", ["B"], domain="positive")


def nf(t):
    (n,), _ = normalise([t], BD)
    return n


TRUE = {
    "difference-of-squares": (b.mul(b.add(x, y), b.add(x, b.neg(y))),
                              b.add(b.mul(x, x), b.neg(b.mul(y, y)))),
    "sum-of-fractions": (b.add(b.mul(x, b.recip(q)), b.mul(y, b.recip(q))),
                         b.mul(b.add(x, y), b.recip(q))),
    "mean-of-shard-means": (b.mul(b.const(Fraction(1, 2)), b.add(b.mul(s, b.recip(q)), b.mul(s, b.recip(q)))),
                            b.mul(s, b.recip(q))),
    "rsqrt-squared": (b.mul(b.pow_(q, Fraction(-1, 2)), b.pow_(q, Fraction(-1, 2))),
                      b.recip(q)),
}
FALSE = {
    "missing-factor": (b.mul(b.add(x, y), b.add(x, y)), b.add(b.mul(x, x), b.mul(y, y))),
    "different-atoms": (b.unary(Op.EXP, x), b.unary(Op.EXP, y)),
    "wrong-scale": (b.mul(b.const(2), s), b.add(s, s, s)),
}


@pytest.mark.parametrize("name", sorted(TRUE))
def test_rational_identities_are_proved(name):
    lhs, rhs = TRUE[name]
    r = cas_equal(nf(lhs), nf(rhs))
    assert r.equal, r.reason


@pytest.mark.parametrize("name", sorted(FALSE))
def test_non_identities_are_not(name):
    lhs, rhs = FALSE[name]
    assert not cas_equal(nf(lhs), nf(rhs)).equal


def test_decide_uses_cas_under_a_common_skeleton():
    from rewriting import decide

    w = b.inp("cw", ["H", "F"])
    lhs = b.einsum([b.unary(Op.EXP, b.mul(b.add(x, y), b.add(x, b.neg(y)))), w], ["B", "F"])
    rhs = b.einsum([b.unary(Op.EXP, b.add(b.mul(x, x), b.neg(b.mul(y, y)))), w], ["B", "F"])
    d = decide(lhs, rhs, Binding({"B": 4, "H": 4, "F": 4}), timeout_s=10)
    assert d.equal is True and "cas" in d.reason and d.cas_pairs
    assert all(cas_equal(p, q).equal for p, q in d.cas_pairs)
