"""Negative tests (STYLE rule 16): unguarded situations must not be rewritten.

Each case is a pair ``(lhs, wrong_rhs)`` that an unguarded rule would equate. Both must be
numerically different (so the case is not vacuous) and must have different normal forms. Cases
that name a rule also check that this rule's matcher refuses the lhs.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from rewriting import build as b
from rewriting import normalise, rules_for
from spec_lang.evaluate import EvaluationError, evaluate, sample_inputs
from spec_lang.term import Binding, Op, term

from rw_helpers import aligned

BD = Binding({"B": 8, "F": 8, "H": 4, "S": 4, "dp": 2, "tp": 2, "cp": 4, "mb": 2})


def _raw_einsum(args, out):
    """An EINSUM built without the shape check (operands may disagree on a dim's shards)."""
    spec = {}
    for a in args:
        for d in a.dims:
            spec.setdefault(d.name, d)
    return term(Op.EINSUM, tuple(args), (tuple(out),), tuple(spec[n] for n in out))


def _x(name, dims, domain="real"):
    return b.inp(name, dims, "param", domain)


x, w = _x("nx", ["B", "F"]), _x("nw", ["F", "H"])
m = _x("nm", ["B", "S"], "mask")


def _cases():
    # contraction split at different axes: one operand over tp, the other over dp
    yield ("split-different-axes", "allreduce-einsum-split",
           b.all_reduce(_raw_einsum([b.shard(x, "F", "tp"), b.shard(w, "F", "dp")], ["B", "H"]), "tp"),
           b.einsum([x, w], ["B", "H"]))
    # different shard counts of the contracted dim (2 vs 4 blocks: a 4/4 vs 2/2/2/2 split)
    yield ("split-different-counts", "allreduce-einsum-split",
           b.all_reduce(_raw_einsum([b.shard(x, "F", "tp"), b.shard(w, "F", "cp")], ["B", "H"]), "tp"),
           b.einsum([x, w], ["B", "H"]))
    # the same axis but different nesting of the contracted dim (F[tp] vs F[dp, tp])
    yield ("split-different-nesting", "allreduce-einsum-split",
           b.all_reduce(_raw_einsum([b.shard(b.shard(x, "F", "dp"), "F", "tp"),
                                     b.shard(w, "F", "tp")], ["B", "H"]), "tp"),
           _raw_einsum([b.shard(x, "F", "dp"), w], ["B", "H"]))
    # nested shard of the contracted dim reduced over the outer axis first: no direct split
    yield ("split-outer-axis-first", "allreduce-einsum-split",
           b.all_reduce(b.einsum([b.shard(b.shard(x, "B", "dp"), "B", "mb")], ["F"]), "dp"),
           b.einsum([b.shard(x, "B", "mb")], ["F"]))
    # the contracted dim is kept: no split (it is a lift instead)
    yield ("split-kept-dim", "allreduce-einsum-split",
           b.all_reduce(b.einsum([b.shard(x, "B", "dp"), w], ["B", "H"]), "dp"),
           b.einsum([x, w], ["B", "H"]))
    # the addends of a Partial over dp do not sum over tp
    yield ("part-wrong-axis", "allreduce-part",
           b.all_reduce(b.part(x, "dp"), "tp"), x)
    # a max over ranks is not a sum: no factor pulling or pushing for max
    yield ("max-is-not-linear", "allreduce-mul-factor",
           b.all_reduce(b.mul(b.const(-1), b.part(x, "tp")), "tp", "max"),
           b.mul(b.const(-1), b.all_reduce(b.part(x, "tp"), "tp", "max")))
    # the max over blocks along F is not the max over B
    yield ("max-shard-other-dim", "allreduce-max-shard",
           b.all_reduce(b.reduce_max(b.shard(x, "F", "tp"), ["B"]), "tp", "max"),
           b.reduce_max(x, ["B"]))
    # (x^2)^(1/2) is |x|, not x
    yield ("pow-pow-sign", "pow-pow", b.pow_(b.pow_(x, 2), Fraction(1, 2)), x)
    # gathering over another axis than the shard's is not its inverse
    yield ("gather-wrong-axis", "allgather-shard",
           term(Op.ALL_GATHER, (b.shard(x, "B", "dp"),), ("tp", "B"), x.dims), x)
    # a sum of blocks along F is not the sum of the whole: ALL_REDUCE of a SHARD over its axis
    yield ("allreduce-of-own-shard", None,
           b.all_reduce(b.shard(x, "F", "tp"), "tp"), b.mul(b.const(2), b.shard(x, "F", "tp")))
    # lifting needs every operand varying over the axis to be a block of the same dim
    yield ("lift-mixed-part", "lift-shard-elementwise",
           b.add(b.shard(x, "B", "dp"), b.part(_x("ny", ["F"]), "dp")),
           b.shard(b.add(x, _x("ny", ["F"])), "B", "dp"))
    # a per-rank constant that differs on one rank is not a constant (a "wrong eps" mutant)
    yield ("rank-const-not-uniform", "rank-const-uniform",
           term(Op.RANK_CONST, (), ("tp", (Fraction(1), Fraction(2))), ()), b.const(1))
    # a wrong constant is not proved (1/dp missing)
    yield ("missing-scale", None,
           b.all_reduce(b.einsum([b.shard(x, "B", "dp")], ["F"]), "dp"),
           b.mul(b.const(Fraction(1, 2)), b.einsum([x], ["F"])))


CASES = list(_cases())


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_not_rewritten(case):
    name, rule, lhs, wrong = case
    rng = np.random.default_rng(0)
    try:
        vals = evaluate([lhs, wrong], BD, sample_inputs([lhs, wrong], BD, rng), rng=rng)
    except EvaluationError:  # ill-typed on purpose (blocks of different sizes): not equal
        vals = None
    if vals is not None and set(lhs.dims) == set(wrong.dims):
        p, q = aligned(vals[lhs], vals[wrong])
        ok = np.isfinite(p) & np.isfinite(q)
        assert not np.allclose(p[ok], q[ok]), f"{name}: the case is vacuous"
    if rule is not None:
        (r,) = [r for r in rules_for(lhs.op) if r.name == rule]
        assert r.match(lhs, BD) is None, f"{rule} fired on {name}"
    (a, c), _ = normalise([lhs, wrong], BD)
    assert a is not c, f"{name}: proved a false equality"


def test_ill_typed_rhs_is_not_a_crash():
    """A rule whose rhs cannot be built (ill-typed input) does not fire; the others go on."""
    bad = b.all_reduce(_raw_einsum([b.shard(b.shard(x, "F", "dp"), "F", "tp"),
                                    b.shard(w, "F", "tp")], ["B", "H"]), "tp")
    good = b.all_reduce(b.einsum([b.shard(x, "F", "tp"), b.shard(w, "F", "tp")], ["B", "H"]), "tp")
    (nb, ng, ref), log = normalise([bad, good, b.einsum([x, w], ["B", "H"])], BD)
    assert ng is ref and nb is not ref
    assert log.rule_errors


def test_nested_split_in_the_right_order_is_proved():
    lhs = b.all_reduce(b.all_reduce(b.einsum([b.shard(b.shard(m, "B", "dp"), "B", "mb")], []),
                                    "dp"), "mb")
    (a, c), _ = normalise([lhs, b.einsum([m], [])], BD)
    assert a is c
