"""Collectives and regions: types, declared backwards, numpy references, errors."""

from __future__ import annotations

import numpy as np
import pytest

from sl_helpers import inp, values
from spec_lang import ops
from spec_lang.autodiff import grad, lower
from spec_lang.collectives import (
    A2A, PRIMITIVES, REGIONS, all_gather, all_reduce, all_to_all_region, broadcast,
    copy_to_tp_region,
    gather_from_sp_region, gather_from_tp_region, prim_term, reduce_from_tp_region,
    reduce_scatter, reduce_scatter_to_sp_region, region, scatter_to_tp_region,
)
from spec_lang.dims import Dim
from spec_lang.errors import PlanError
from spec_lang.tensor import Tensor, TraceContext, tracing
from spec_lang.term import DimSpec, Op, term, walk

B, S, H = Dim("B", 2), Dim("S", 4), Dim("H", 3)
MESH = {"tp": 2, "dp": 2}
SIZES = {"B": 2, "S": 4, "H": 3, **MESH}
HERE = r"test_collectives\.py:\d+"


def plan_trace() -> TraceContext:
    ctx = TraceContext("plan", mesh=dict(MESH))
    for d in (B, S, H):
        ctx.record_dim(d)
    return ctx


def sharded_s(x: Tensor) -> Tensor:
    dims = tuple(DimSpec(d.name, ("tp",)) if d.name == "S" else d for d in x.term.dims)
    return Tensor(term(Op.SHARD, (x.term,), ("S", "tp"), dims))


# region wrapper, whether its input is S-sharded, expected op after lower, backward op
WRAPPERS = {
    "copy_to_tp": (lambda x: copy_to_tp_region(x), False, None, Op.ALL_REDUCE),
    "reduce_from_tp": (lambda x: reduce_from_tp_region(x), False, Op.ALL_REDUCE, None),
    "scatter_to_tp": (lambda x: scatter_to_tp_region(x, S), False, Op.SHARD, Op.ALL_GATHER),
    "gather_from_tp": (lambda x: gather_from_tp_region(x, S), True, Op.ALL_GATHER, Op.SHARD),
    "reduce_scatter_to_sp": (lambda x: reduce_scatter_to_sp_region(x, S), False,
                             Op.REDUCE_SCATTER, Op.ALL_GATHER),
    "gather_from_sp": (lambda x: gather_from_sp_region(x, S), True, Op.ALL_GATHER,
                       Op.REDUCE_SCATTER),
    "all_to_all": (lambda x: all_to_all_region(x, "tp", B, S), True, Op.ALL_TO_ALL,
                   Op.ALL_TO_ALL),
}


def test_every_declared_region_has_a_wrapper_test() -> None:
    assert set(WRAPPERS) == set(REGIONS)


@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_region_forward_and_declared_backward(name: str) -> None:
    wrap, sharded_in, fwd_op, bwd_op = WRAPPERS[name]
    with tracing(plan_trace()):
        x = inp("x", B, S, H)
        xin = sharded_s(x) if sharded_in else x
        y = wrap(xin)
        loss = ops.sum(y * y)
    assert y.term.op is Op.REGION and y.term.attrs[:3] == (name, REGIONS[name].fwd,
                                                           REGIONS[name].bwd)
    (low,) = lower([y.term])
    assert (low is xin.term) if fwd_op is None else (low.op is fwd_op and low.args[0] is xin.term)
    (g,) = grad(loss.term, [xin.term])
    assert g.dims == xin.term.dims
    assert (g.op is not Op.REGION) and (bwd_op is None or g.op is bwd_op)
    assert not any(n.op is Op.REGION for n in walk(lower([g])[0]))


def test_region_backward_values_match_megatron() -> None:
    """copy_to_tp: the gradient of a replicated input is the sum of the ranks' gradients."""
    with tracing(plan_trace()):
        x = inp("x", B, H)
        w = Tensor(term(Op.SHARD, (inp("w", H, S).term,), ("S", "tp"),
                        (DimSpec("H"), DimSpec("S", ("tp",)))))
        y = ops.einsum(copy_to_tp_region(x), w, out=(B, S))
        loss = ops.sum(y)
    (gx,) = grad(loss.term, [x.term])
    rng = np.random.default_rng(0)
    xv, wv = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    v = values([gx], SIZES, {"x": xv, "w": wv})[gx]
    assert "@tp" not in v.axes  # all-reduced: the same on every rank
    np.testing.assert_allclose(v.transpose_to(("B", "H")), np.broadcast_to(wv.sum(1), (2, 3)),
                               rtol=1e-12)


def test_wrong_declared_backward_type_is_a_plan_error_naming_the_site() -> None:
    with tracing(plan_trace()):
        x = inp("x", B, S, H)
        y = region(x, "my_scatter", "split", "identity", "tp", S)
        loss = ops.sum(y * y)
    with pytest.raises(PlanError, match=HERE + r": region my_scatter \(forward split, declared "
                                               r"backward identity over 'tp'\).*ill-typed"):
        grad(loss.term, [x.term])


def test_plain_collective_on_a_differentiated_path_is_a_plan_error() -> None:
    with tracing(plan_trace()):
        x = inp("x", B, H)
        loss = ops.sum(all_reduce(x, "tp") * x)
    with pytest.raises(PlanError, match=HERE + r": all_reduce over 'tp' is on a differentiated "
                                               "path but has no declared backward"):
        grad(loss.term, [x.term])


def test_collective_on_data_only_path_is_fine() -> None:
    with tracing(plan_trace()):
        x, m = inp("x", B, H), inp("m", B, H, domain="mask", kind="data")
        loss = ops.sum(x * x) / all_reduce(ops.sum(m), "dp")
    (g,) = grad(loss.term, [x.term])
    assert g.dims == x.term.dims


def test_collective_errors() -> None:
    with tracing(plan_trace()):
        x = inp("x", B, S, H)
        with pytest.raises(PlanError, match=HERE + r": collective over axis 'cp', which is not in "
                                                   "the mesh"):
            all_reduce(x, "cp")
        with pytest.raises(PlanError, match=r"all_gather over 'tp' along S, but S is placed as S "
                                            r"\(its innermost shard must be 'tp'\)"):
            all_gather(x, "tp", S)
        with pytest.raises(PlanError, match='use "sum", "avg" or "max"'):
            all_reduce(x, "tp", "prod")
        with pytest.raises(PlanError, match="src=5"):
            broadcast(x, "tp", 5)
        with pytest.raises(PlanError, match=r"dim H \(size 3, 3 left before 'tp'\) on axis 'tp' "
                                            r"\(size 2\); 2 does not divide 3"):
            reduce_scatter(x, "tp", H)
        with pytest.raises(PlanError, match="unknown primitive 'allreduce'"):
            region(x, "bad", "allreduce", "identity")
        avg = all_reduce(x, "dp", "avg")
        assert avg.term.op is Op.MUL and any(a.op is Op.AXIS_SIZE or (
            a.op is Op.RECIP and a.args[0].op is Op.AXIS_SIZE) for a in avg.term.args)
        assert reduce_scatter(x, "tp", S).term.dim("S") == DimSpec("S", ("tp",))


@pytest.mark.parametrize("name", sorted(set(PRIMITIVES) - set(A2A)))  # two-dim: test_moe.py
def test_numpy_reference_matches_the_evaluator(name: str) -> None:
    """Each primitive's per-rank numpy reference agrees with evaluate() of its term."""
    rng = np.random.default_rng(3)
    n = 2
    needs = PRIMITIVES[name].needs_dim
    with tracing(plan_trace()):
        base = inp("x", B, S, kind="data")
        # per-rank input: a shard for all_gather, the replicated value for split, else a PART
        if name == "all_gather":
            x = sharded_s(base)
        elif name == "split":
            x = base
        else:
            x = Tensor(term(Op.PART, (base.term,), ("tp",), base.term.dims))
        out = prim_term(name, x.term, "tp", "S" if needs else None)
    xv = rng.standard_normal((2, 4))
    vals = values([x.term, out], SIZES, {"x": xv})
    xr = vals[x.term].transpose_to(("@tp", "B", "S"))
    xr = np.broadcast_to(xr, (n,) + xr.shape[1:])
    ref = PRIMITIVES[name].ref([xr[r] for r in range(n)], 1)
    got = vals[out].transpose_to(("@tp", "B", "S"))
    for r in range(n):
        np.testing.assert_allclose(np.broadcast_to(got[min(r, got.shape[0] - 1)], ref[r].shape),
                                   ref[r], rtol=1e-12)
