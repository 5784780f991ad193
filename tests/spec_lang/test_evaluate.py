"""The reference evaluator against direct numpy computations, one op family at a time."""

import numpy as np
import pytest

from spec_lang.evaluate import EvaluationError, NamedArray, evaluate, sample_inputs
from spec_lang.term import Binding, DimSpec as D, Op, term

B = Binding({"B": 4, "H": 6, "F": 8, "V": 12, "tp": 2, "dp": 2, "mb": 2})


def inp(name, *dims, domain="real", index_dim=None):
    attrs = (name, "data", domain) + ((index_dim,) if index_dim else ())
    return term(Op.INPUT, (), attrs, tuple(D(d) for d in dims))


def val(t, inputs, **kw):
    return evaluate([t], B, inputs, **kw)[t]


def test_einsum_contracts_every_dim_not_in_output():
    x, w = inp("x", "B", "H"), inp("w", "H", "F")
    rng = np.random.default_rng(0)
    xs, ws = rng.standard_normal((4, 6)), rng.standard_normal((6, 8))
    y = term(Op.EINSUM, (x, w), (("B", "F"),), (D("B"), D("F")))
    s = term(Op.EINSUM, (x,), ((),), ())
    np.testing.assert_allclose(val(y, {"x": xs, "w": ws}).data, xs @ ws, rtol=1e-12)
    np.testing.assert_allclose(val(s, {"x": xs}).data, xs.sum(), rtol=1e-12)


def test_shard_then_all_gather_is_identity_and_blocks_are_in_rank_order():
    x = inp("x", "B", "F")
    xs = np.arange(32.0).reshape(4, 8)
    sh = term(Op.SHARD, (x,), ("F", "tp"), (D("B"), D("F", ("tp",))))
    v = val(sh, {"x": xs})
    assert v.axes == ("@tp", "B", "F")
    np.testing.assert_array_equal(v.data[1], xs[:, 4:])
    ag = term(Op.ALL_GATHER, (sh,), ("tp", "F"), (D("B"), D("F")))
    np.testing.assert_array_equal(val(ag, {"x": xs}).data, xs)


def test_nested_shards_split_outer_axis_first():
    x = inp("x", "B")
    xs = np.arange(4.0)
    s1 = term(Op.SHARD, (x,), ("B", "dp"), (D("B", ("dp",)),))
    s2 = term(Op.SHARD, (s1,), ("B", "mb"), (D("B", ("dp", "mb")),))
    v = val(s2, {"x": xs})
    assert v.axes == ("@mb", "@dp", "B")
    assert v.at_rank({"dp": 1, "mb": 0}).data.tolist() == [2.0]
    assert v.at_rank({"dp": 0, "mb": 1}).data.tolist() == [1.0]


def test_all_reduce_of_replicated_value_multiplies_by_axis_size():
    x = inp("x", "H")
    xs = np.ones(6)
    ar = term(Op.ALL_REDUCE, (x,), ("tp", "sum"), (D("H"),))
    np.testing.assert_array_equal(val(ar, {"x": xs}).data, 2 * xs)


def test_part_addends_sum_to_the_value_and_differ_per_rank():
    x = inp("x", "H")
    xs = np.arange(6.0)
    p = term(Op.PART, (x,), ("tp",), (D("H"),))
    ar = term(Op.ALL_REDUCE, (p,), ("tp", "sum"), (D("H"),))
    out = evaluate([ar], B, {"x": xs}, rng=np.random.default_rng(3))
    np.testing.assert_allclose(out[ar].data, xs, rtol=1e-12, atol=1e-12)
    assert not np.allclose(out[p].data[0], out[p].data[1])


def test_one_hot_on_sharded_vocab_is_the_local_masked_lookup():
    tok = inp("tok", "B", domain="index", index_dim="V")
    toks = np.array([0.0, 5.0, 6.0, 11.0])
    oh = term(Op.ONE_HOT, (tok,), ("V",), (D("B"), D("V", ("tp",))))
    v = val(oh, {"tok": toks})
    # rank 0 holds vocab 0..5, rank 1 holds 6..11
    assert v.at_rank({"tp": 0}).data.sum(axis=1).tolist() == [1.0, 1.0, 0.0, 0.0]
    assert v.at_rank({"tp": 1}).data[2, 0] == 1.0 and v.at_rank({"tp": 1}).data[3, 5] == 1.0


def test_rank_const_and_causal_mask_and_rope():
    rc = term(Op.RANK_CONST, (), ("tp", (1, 3)), ())
    assert val(rc, {}).data.tolist() == [1.0, 3.0]
    b = Binding({"S": 3, "T": 3, "h": 2})
    m = term(Op.CAUSAL_MASK, (), ("S", "T"), (D("S"), D("T")))
    assert evaluate([m], b, {})[m].data.tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    c = term(Op.ROPE_COS, (), ("S", "h", 10000), (D("S"), D("h")))
    got = evaluate([c], b, {})[c].data
    np.testing.assert_allclose(got[2, 1], np.cos(2 * 10000 ** (-1 / 2)), rtol=1e-12)


def test_sample_inputs_masks_are_binary_with_a_token_and_indices_in_range():
    m = inp("m", "B", "V", domain="mask")
    t = inp("t", "B", domain="index", index_dim="V")
    vals = sample_inputs([m, t], B, np.random.default_rng(0))
    assert set(np.unique(vals["m"])) <= {0.0, 1.0} and vals["m"].sum() >= 1
    assert vals["t"].min() >= 0 and vals["t"].max() < 12


def test_missing_input_is_an_error():
    with pytest.raises(EvaluationError, match="no value for input 'x'"):
        val(inp("x", "H"), {})


def test_named_array_rejects_wrong_rank():
    with pytest.raises(EvaluationError):
        NamedArray(("a",), np.zeros((2, 2)))


def test_shard_of_a_rank_varying_value_keeps_each_ranks_own_block():
    x = inp("x", "F")
    xs = np.arange(8.0)
    p = term(Op.PART, (x,), ("tp",), (D("F"),))
    s = term(Op.SHARD, (p,), ("F", "tp"), (D("F", ("tp",)),))
    out = evaluate([s], B, {"x": xs}, rng=np.random.default_rng(5))
    pv, sv = out[p], out[s]
    assert sv.axes == ("@tp", "F")
    np.testing.assert_array_equal(sv.data[0], pv.data[0][:4])
    np.testing.assert_array_equal(sv.data[1], pv.data[1][4:])


def test_one_hot_over_a_sharded_dim_varies_over_that_axis():
    from spec_lang.term import varying_axes

    tok = inp("tok2", "B", domain="index", index_dim="V")
    local = term(Op.ONE_HOT, (tok,), ("V",), (D("B"), D("V", ("tp",))))
    full = term(Op.ONE_HOT, (tok,), ("V",), (D("B"), D("V")))
    assert varying_axes(local) == {"tp"}
    assert varying_axes(full) == frozenset()
    # and the evaluator agrees: the local one-hot has a rank axis
    assert "@tp" in val(local, {"tok2": np.zeros(4)}).axes


def test_keep_roots_gives_the_same_root_values_and_nothing_else():
    x, w = inp("x", "B", "H"), inp("w", "H", "F")
    h = term(Op.EINSUM, (x, w), (("B", "F"),), (D("B"), D("F")))
    y = term(Op.EXP, (h,), (), h.dims)
    z = term(Op.ADD, (y, h), (), h.dims)
    vals = sample_inputs([z], B, np.random.default_rng(0))
    full = evaluate([z, y], B, vals)
    lean = evaluate([z, y], B, vals, keep="roots")
    assert set(lean) == {z, y}
    np.testing.assert_array_equal(lean[z].data, full[z].data)
    np.testing.assert_array_equal(lean[y].data, full[y].data)
    with pytest.raises(EvaluationError, match="keep must be"):
        evaluate([z], B, vals, keep="some")
