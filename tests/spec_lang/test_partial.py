"""The Partial-sum table (spec_lang/partial.py) proven row by row, and the trace-time lint.

For every row ``f`` of :data:`PARTIAL_TABLE`, both sides are evaluated in float64:
``ALL_REDUCE_dp(f(a_r))`` (f applied to each rank's addend, then the pending sum reduced) and
``f(sum_r a_r)`` (the spec). The addends are real local sums: ``a_r = sum_{i in shard r} x_i``
over a dim ``N`` that is Shard(N) over dp (positive ``x`` where ``f`` needs it). Rows that
commute agree on every hypothesis draw; rows that do not show a counterexample.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from spec_lang import ops
from spec_lang.evaluate import evaluate
from spec_lang.partial import PARTIAL_TABLE, PartialSumWarning, is_pending, pending_sum_notes
from spec_lang.tensor import Tensor
from spec_lang.term import Binding, DimSpec, Op, term

DP = "dp"
BIND = Binding({"N": 6, "M": 4, "dp": 3})


def _input(name, domain="real", dims=("N", "M")):
    return Tensor(term(Op.INPUT, (), (name, "data", domain), tuple(DimSpec(d) for d in dims)),
                  "test:0")


def _local(x: Tensor) -> Tensor:
    """SHARD(x, N, dp): the rank's block of x along N."""
    dims = tuple(DimSpec(d.name, (DP,)) if d.name == "N" else d for d in x.term.dims)
    return Tensor(term(Op.SHARD, (x.term,), ("N", DP), dims), "test:0")


def _reduce(t: Tensor) -> Tensor:
    return Tensor(term(Op.ALL_REDUCE, (t.term,), (DP, "sum"), t.term.dims), "test:0")


# Each row: (build(p, q, c, m) -> Tensor, domain). p, q are the pending (or full) sums over N
# (dims (M,)); c is a replicated real (M,); m a replicated 0/1 mask (M,).
def _chunk_concat(p, q, c, m):
    return ops.concat(ops.chunks(p, "M", 2), "M")


ROWS = {
    "ADD": [(lambda p, q, c, m: p + q, "real", True),
            (lambda p, q, c, m: p + c, "real", False)],
    "NEG": [(lambda p, q, c, m: -p, "real", True)],
    "MUL": [(lambda p, q, c, m: p * c, "real", True),
            (lambda p, q, c, m: p * q, "real", False)],
    "EINSUM": [(lambda p, q, c, m: ops.einsum(p, c, out=()), "real", True),
               (lambda p, q, c, m: ops.einsum(p, q, out=()), "real", False)],
    "CAST": [(lambda p, q, c, m: ops.cast(p, "bf16"), "real", True)],
    "STOP_GRAD": [(lambda p, q, c, m: ops.stop_gradient(p), "real", True)],
    "RENAME": [(lambda p, q, c, m: ops.rename(p, "M", "K"), "real", True)],
    "CHUNK": [(lambda p, q, c, m: ops.chunk(p, "M", 2, 1), "real", True)],
    "CONCAT": [(_chunk_concat, "real", True),
               (lambda p, q, c, m: ops.concat([ops.chunk(p, "M", 2, 0), ops.chunk(c, "M", 2, 1)],
                                              "M"), "real", False)],
    "WHERE": [(lambda p, q, c, m: ops.where(m, p, q), "real", True),
              (lambda p, q, c, m: ops.where(m, p, c), "real", False)],
    "RECIP": [(lambda p, q, c, m: ops.recip(p), "positive", False)],
    "POW": [(lambda p, q, c, m: ops.pow(p, 2), "real", False)],
    "EXP": [(lambda p, q, c, m: ops.exp(p), "real", False)],
    "LOG": [(lambda p, q, c, m: ops.log(p), "positive", False)],
    "SQRT": [(lambda p, q, c, m: ops.sqrt(p), "positive", False)],
    "RSQRT": [(lambda p, q, c, m: ops.rsqrt(p), "positive", False)],
    "SIGMOID": [(lambda p, q, c, m: ops.sigmoid(p), "real", False)],
    "SILU": [(lambda p, q, c, m: ops.silu(p), "real", False)],
    "TANH": [(lambda p, q, c, m: ops.tanh(p), "real", False)],
    "GELU": [(lambda p, q, c, m: ops.gelu(p), "real", False)],
    "ERF": [(lambda p, q, c, m: ops.erf(p), "real", False)],
    "MAXIMUM": [(lambda p, q, c, m: ops.maximum(p, c), "real", False)],
    "REDUCE_MAX": [(lambda p, q, c, m: ops.max(p, "M"), "real", False)],
}


def _sides(build, domain):
    x, y = _input("x", domain), _input("y", domain)
    c, m = _input("c", "real", ("M",)), _input("m", "mask", ("M",))
    spec = build(ops.sum(x, "N"), ops.sum(y, "N"), c, m)
    plan = _reduce(build(ops.sum(_local(x), "N"), ops.sum(_local(y), "N"), c, m))
    return spec, plan


def _values(spec, plan, seed, domain="real"):
    rng = np.random.default_rng(seed)
    inputs = {"x": rng.standard_normal((6, 4)), "y": rng.standard_normal((6, 4)),
              "c": rng.standard_normal(4), "m": (rng.uniform(size=4) < 0.5).astype(float)}
    if domain == "positive":            # log / sqrt / recip: positive addends and sums
        inputs["x"], inputs["y"] = np.abs(inputs["x"]) + 0.1, np.abs(inputs["y"]) + 0.1
    v = evaluate([spec.term, plan.term], BIND, inputs, rng=rng)
    return v[spec.term].transpose_to(v[spec.term].axes), \
        v[plan.term].transpose_to(v[spec.term].axes)


def test_every_table_row_has_a_numeric_proof():
    assert set(ROWS) == set(PARTIAL_TABLE) - {"ALL_REDUCE_MAX"}


@pytest.mark.parametrize("name", sorted(ROWS))
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_commuting_rows_agree(name, seed):
    for build, domain, commutes in ROWS[name]:
        if not commutes:
            continue
        assert PARTIAL_TABLE[name].commutes
        s, p = _values(*_sides(build, domain), seed, domain)
        np.testing.assert_allclose(p, s, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_non_commuting_rows_have_a_counterexample(name):
    for build, domain, commutes in ROWS[name]:
        if commutes:
            continue
        # a row that commutes in general lists its failing case in ``when``
        assert not PARTIAL_TABLE[name].commutes or PARTIAL_TABLE[name].when
        s, p = _values(*_sides(build, domain), 0, domain)
        assert np.max(np.abs(p - s)) > 1e-3 * (1 + np.max(np.abs(s))), (name, s, p)


def test_all_reduce_max_row():
    x = _input("x")
    local = ops.sum(_local(x), "N")
    plan = Tensor(term(Op.ALL_REDUCE, (local.term,), (DP, "max"), local.term.dims), "t:0")
    s, p = _values(ops.sum(x, "N"), plan, 0)
    assert not PARTIAL_TABLE["ALL_REDUCE_MAX"].commutes
    assert np.max(np.abs(p - s)) > 1e-3


def test_add_of_a_constant_is_off_by_r_minus_1_times_it():
    # B26: sum_r (a_r + 10) = sum_r a_r + |dp| * 10
    s, p = _values(*_sides(lambda p, q, c, m: p + 10, "real"), 3)
    np.testing.assert_allclose(p - s, (BIND["dp"] - 1) * 10, rtol=1e-12)


def test_pending_tracks_sources_and_reductions():
    x = _input("x")
    local = ops.sum(_local(x), "N")
    assert is_pending(local.term, DP) and not is_pending(local.term, "tp")
    assert not is_pending(_reduce(local).term, DP)
    assert not is_pending(ops.sum(x, "N").term, DP)
    assert is_pending((ops.exp(local) * 2).term, DP)


def test_lint_notes_non_linear_ops_only():
    x, c = _input("x"), _input("c", "real", ("M",))
    local = ops.sum(_local(x), "N")
    assert pending_sum_notes((local * c + local).term, DP) == []
    notes = pending_sum_notes((ops.exp(local) + c).term, DP)
    assert [n.op for n, _ in notes] == [Op.EXP, Op.ADD]        # dataflow order
    assert "added |dp| times" in notes[1][1]
    m = _input("m", "mask", ("M",))
    assert pending_sum_notes(ops.where(m, local, local * 2).term, DP) == []
    assert [n.op for n, _ in pending_sum_notes(ops.where(m, local, c).term, DP)] == [Op.WHERE]
    # under a mean reduction an affine map commutes; a non-linear one does not
    assert pending_sum_notes((local + c).term, DP, average=True) == []
    assert [n.op for n, _ in pending_sum_notes(ops.exp(local).term, DP, average=True)] == [Op.EXP]
    # an operand already reduced over dp may be used non-linearly
    assert pending_sum_notes((local / _reduce(ops.sum(local, "M"))).term, DP) == []


def test_lint_is_a_warning_at_the_all_reduce():
    from spec_lang.collectives import all_reduce

    x = _input("x")
    local = ops.sum(_local(x), "N")
    with pytest.warns(PartialSumWarning, match="RECIP"):
        all_reduce(ops.recip(local), DP)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        all_reduce(local * 3, DP)


def test_add_commutes_with_a_mean_reduction():
    # Partial("avg"): mean_r (a_r + c) = mean_r a_r + c (the ADD row's exception)
    x, c = _input("x"), _input("c", "real", ("M",))
    r = ops.recip(ops.axis_size(DP))
    spec = r * ops.sum(x, "N") + c
    plan = r * _reduce(ops.sum(_local(x), "N") + c)
    s, p = _values(spec, plan, 5)
    np.testing.assert_allclose(p, s, rtol=1e-12)
