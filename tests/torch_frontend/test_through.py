"""``frontend._through``: the spec value as a rank holds it, one ``SHARD`` per sharded mesh
axis (round 46c, R46c-3: a value constant along the sharded dim, the zeros
``optimizer.zero_grad(set_to_none=False)`` leaves, crashed the goal's construction)."""

from __future__ import annotations

from fractions import Fraction

from spec_lang.term import DimSpec, Op, term
from spec_lang.torch_frontend.frontend import _through
from spec_lang.torch_frontend.values import const


def test_a_sharded_dim_is_sharded_over_its_axis():
    w = term(Op.INPUT, (), ("w", "param", "real"), (DimSpec("ffn"), DimSpec("hidden")))
    t = _through(w, ((DimSpec("ffn"),), (DimSpec("hidden"),)), ("S(0)",), ["dp"])
    assert t.op is Op.SHARD and t.attrs == ("ffn", "dp")
    assert t.dim("ffn").shards == ("dp",) and t.dim("hidden").shards == ()


def test_a_value_without_the_sharded_dim_is_its_own_shard():
    zero = const(Fraction(0))
    layout = ((DimSpec("ffn"),), (DimSpec("hidden"),))
    assert _through(zero, layout, ("S(0)",), ["dp"]) is zero
    assert _through(zero, layout, ("S(0)", "S(1)"), ["dp", "tp"]) is zero


def test_a_replicated_value_is_left_as_it_is():
    w = term(Op.INPUT, (), ("w", "param", "real"), (DimSpec("ffn"),))
    assert _through(w, ((DimSpec("ffn"),),), ("R",), ["dp"]) is w
