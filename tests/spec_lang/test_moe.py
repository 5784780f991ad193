"""MoE building blocks: topk_mask, all_to_all (plain and region), the MoE model library."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from sl_helpers import inp, values
from spec_lang import SGD, ops, trace_spec
from spec_lang.autodiff import grad, lower
from spec_lang.collectives import PRIMITIVES, all_to_all, all_to_all_region, region
from spec_lang.dims import Dim
from spec_lang.errors import PlanError, SpecError
from spec_lang.evaluate import evaluate
from spec_lang.models.moe import MOE_DEBUG, MoEConfig, moe
from spec_lang.tensor import Tensor, TraceContext, tracing
from spec_lang.term import Binding, DimSpec, Op, term, varying_axes

B, S, E, H = Dim("B", 4), Dim("S", 2), Dim("E", 4), Dim("H", 3)
MESH = {"ep": 2}
SIZES = {"B": 4, "S": 2, "E": 4, "H": 3, **MESH}


def plan_trace() -> TraceContext:
    ctx = TraceContext("plan", mesh=dict(MESH))
    for d in (B, S, E, H):
        ctx.record_dim(d)
    return ctx


def sharded(x: Tensor, d: str, a: str = "ep") -> Tensor:
    dims = tuple(DimSpec(s.name, s.shards + (a,)) if s.name == d else s for s in x.term.dims)
    return Tensor(term(Op.SHARD, (x.term,), (d, a), dims))


# -- topk_mask --------------------------------------------------------------------------------

def test_topk_mask_values_and_ties_go_to_the_lower_index() -> None:
    with tracing(TraceContext("spec")):
        x = inp("x", B, E)
        m = ops.topk_mask(x, E, 2)
    assert m.term.op is Op.STOP_GRAD and m.term.args[0].op is Op.TOPK_MASK
    xv = np.array([[0.1, 0.5, 0.3, 0.2], [1.0, 1.0, 1.0, 0.0], [-1, -2, -3, -4],
                   [0.0, 2.0, 2.0, 2.0]])
    got = values([m.term], SIZES, {"x": xv})[m.term].transpose_to(("B", "E"))
    want = np.array([[0, 1, 1, 0], [1, 1, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0]], dtype=float)
    np.testing.assert_array_equal(got, want)


def test_topk_mask_gets_no_gradient_but_the_selected_values_do() -> None:
    with tracing(TraceContext("spec")):
        x = inp("x", B, E)
        y = ops.sum(x * ops.topk_mask(x, E, 1))
    (g,) = grad(y.term, [x.term])
    xv = np.array([[0.1, 0.5, 0.3, 0.2]] * 4)
    got = values([g], SIZES, {"x": xv})[g].transpose_to(("B", "E"))
    np.testing.assert_array_equal(got, np.array([[0, 1, 0, 0]] * 4, dtype=float))


def test_bare_topk_mask_on_a_differentiated_path_is_an_error() -> None:
    with tracing(TraceContext("spec")):
        x = inp("x", B, E)
        m = Tensor(term(Op.TOPK_MASK, (x.term,), ("E", 1), x.term.dims))
        y = ops.sum(x * m)
    with pytest.raises(SpecError, match="TOPK_MASK is on a differentiated path"):
        grad(y.term, [x.term])


def test_topk_mask_rejects_a_sharded_dim_and_bad_k() -> None:
    with tracing(plan_trace()):
        x = sharded(inp("x", B, E), "E")
        with pytest.raises(PlanError, match="holds only a block of E; gather it first"):
            ops.topk_mask(x, E, 1)
        with pytest.raises(PlanError, match="k=5 must be an int in 1..4"):
            ops.topk_mask(inp("y", B, E), E, 5)


# -- all_to_all --------------------------------------------------------------------------------

def _per_rank(v, axes: tuple[str, ...], n: int) -> list[np.ndarray]:
    a = v.transpose_to(("@ep",) + axes) if "@ep" in v.axes else np.broadcast_to(
        v.transpose_to(axes), (n,) + tuple(v.transpose_to(axes).shape))
    return [a[r] for r in range(n)]


def test_all_to_all_evaluator_matches_the_per_rank_reference_and_its_definition() -> None:
    with tracing(plan_trace()):
        x = sharded(inp("x", B, E, H), "B")                          # tokens sharded over ep
        y = all_to_all(x, "ep", E, B)                                # dispatch: experts sharded
        alt = Tensor(term(Op.SHARD, (term(Op.ALL_GATHER, (x.term,), ("ep", "B"), inp(
            "x", B, E, H).term.dims),), ("E", "ep"), y.term.dims))  # SHARD(ALL_GATHER(x))
    assert y.term.dim("E") == DimSpec("E", ("ep",)) and y.term.dim("B") == DimSpec("B")
    assert "ep" in varying_axes(y.term)
    xv = np.random.default_rng(0).standard_normal((4, 4, 3))
    vals = values([x.term, y.term, alt.term], SIZES, {"x": xv})
    xs = _per_rank(vals[x.term], ("B", "E", "H"), 2)
    ref = PRIMITIVES["all_to_all"].ref(xs, (1, 0))                   # split E, concat B
    got = _per_rank(vals[y.term], ("B", "E", "H"), 2)
    alt_v = _per_rank(vals[alt.term], ("B", "E", "H"), 2)
    for r in range(2):
        np.testing.assert_allclose(got[r], ref[r], rtol=0, atol=0)
        np.testing.assert_allclose(alt_v[r], ref[r], rtol=0, atol=0)
        # rank r holds experts block r for every token
        np.testing.assert_allclose(got[r], xv[:, 2 * r:2 * r + 2, :])


def test_all_to_all_on_rank_varying_values_permutes_blocks() -> None:
    """Each rank's own (PART) value: the reference over per-rank blocks, and the inverse."""
    with tracing(plan_trace()):
        base = inp("x", B, E, H)
        own = Tensor(term(Op.PART, (base.term,), ("ep",), base.term.dims))
        x = sharded(own, "B")                                       # block r of rank r's value
        y = all_to_all(x, "ep", E, B)
        z = all_to_all(y, "ep", B, E)
    xv = np.random.default_rng(1).standard_normal((4, 4, 3))
    vals = values([x.term, y.term, z.term], SIZES, {"x": xv})
    xs = _per_rank(vals[x.term], ("B", "E", "H"), 2)
    ref = PRIMITIVES["all_to_all"].ref(xs, (1, 0))
    got = _per_rank(vals[y.term], ("B", "E", "H"), 2)
    back = _per_rank(vals[z.term], ("B", "E", "H"), 2)
    for r in range(2):
        np.testing.assert_allclose(got[r], ref[r])
        np.testing.assert_allclose(back[r], xs[r])                  # combine inverts dispatch
    assert got[0].shape == (4, 2, 3) and xs[0].shape == (2, 4, 3)


def test_all_to_all_region_declared_backward_is_the_reverse_all_to_all() -> None:
    with tracing(plan_trace()):
        x = sharded(inp("x", B, E, H), "B")
        y = all_to_all_region(x, "ep", E, B)
        w = sharded(inp("w", E, H), "E")
        loss = ops.sum(y * w)
    (low,) = lower([y.term])
    assert low.op is Op.ALL_TO_ALL and low.attrs == ("ep", "E", "B")
    (g,) = grad(loss.term, [x.term])
    assert set(g.dims) == set(x.term.dims) and g.op is Op.ALL_TO_ALL and g.attrs == ("ep", "B", "E")
    xv = np.random.default_rng(2).standard_normal((4, 4, 3))
    wv = np.random.default_rng(3).standard_normal((4, 3))
    gv = values([g], SIZES, {"x": xv, "w": wv})[g]
    # d loss / d x on rank r (its tokens B block r) is w for every expert
    for r, blk in enumerate(_per_rank(gv, ("B", "E", "H"), 2)):
        np.testing.assert_allclose(blk, np.broadcast_to(wv, (2, 4, 3)))


def test_all_to_all_errors_name_the_site() -> None:
    with tracing(plan_trace()):
        x = inp("x", B, E, H)
        with pytest.raises(PlanError, match=r"test_moe\.py:\d+: all_to_all on .*innermost shard"):
            all_to_all(x, "ep", E, B)                 # B is not sharded over ep
        xs = sharded(x, "B")
        y = region(xs, "bad", "all_to_all", "all_to_all", "ep", ("E", "B"))
        loss = ops.sum(y * y)
    with pytest.raises(PlanError, match="declared backward is ill-typed"):
        grad(loss.term, [xs.term])
    with tracing(plan_trace()):
        xs = sharded(inp("x", B, E, H), "B")
        y = all_to_all(xs, "ep", E, B)
        loss = ops.sum(y * y)
    with pytest.raises(PlanError, match="all_to_all over 'ep' is on a differentiated path"):
        grad(loss.term, [xs.term])


# -- the MoE model --------------------------------------------------------------------------------

def test_moe_debug_params_and_dims() -> None:
    m = moe(MOE_DEBUG)
    assert m.params["layers.0.moe.router"] == (m.dims.H, m.dims.E)
    assert m.params["layers.0.moe.experts.w1"] == (m.dims.E, m.dims.H, m.dims.FE)
    assert m.params["layers.0.moe.shared.w2"] == (m.dims.FS, m.dims.H)
    assert "layers.0.moe.e_score_correction_bias" in m.data          # selection-only bias: data
    assert "layers.0.moe.e_score_correction_bias" not in m.params
    it = trace_spec(m.spec(SGD()))
    assert "grad:layers.0.moe.router" in it.outputs


def test_moe_config_errors() -> None:
    import dataclasses
    with pytest.raises(SpecError, match="top_k=5 must be in 1..4"):
        moe(dataclasses.replace(MOE_DEBUG, top_k=5))
    with pytest.raises(SpecError, match="gating 'relu'"):
        moe(dataclasses.replace(MOE_DEBUG, gating="relu"))
    m = moe(dataclasses.replace(MOE_DEBUG, n_groups=8, topk_groups=4))
    with pytest.raises(SpecError, match="group-limited routing"):
        trace_spec(m.spec(SGD()))


def _numpy_moe_layer(x, wr, w1, w3, w2, bias, cfg: MoEConfig):
    """Reference MoE layer (DeepSeek-V3 inference/model.py Gate + MoE, without shared experts)."""
    logits = x @ wr
    if cfg.gating == "sigmoid":
        s = 1 / (1 + np.exp(-logits))
        probs = s / s.sum(-1, keepdims=True)
    else:
        e = np.exp(logits - logits.max(-1, keepdims=True))
        s = probs = e / e.sum(-1, keepdims=True)
    sel = s + (bias if bias is not None else 0)
    idx = np.argsort(-sel, axis=-1, kind="stable")[..., :cfg.top_k]
    w = np.take_along_axis(s, idx, -1)
    if cfg.norm_topk_prob:
        w = w / w.sum(-1, keepdims=True)
    w = w * float(cfg.routed_scaling)
    y = np.zeros_like(x)
    count = np.zeros(logits.shape[-1])
    for t in range(x.shape[0]):
        for j, e_ in enumerate(idx[t]):
            h = x[t] @ w1[e_]
            y[t] += w[t, j] * (((h / (1 + np.exp(-h))) * (x[t] @ w3[e_])) @ w2[e_])
            count[e_] += 1
    n = x.shape[0]
    aux = logits.shape[-1] * np.sum(count / (cfg.top_k * n) * probs.mean(0))
    return y, aux


@pytest.mark.parametrize("gating", ["sigmoid", "softmax"])
def test_moe_layer_matches_a_numpy_reference(gating: str) -> None:
    import dataclasses

    from spec_lang.models.moe import MoEContext, moe_layer
    from spec_lang.spec import Params

    cfg = dataclasses.replace(MOE_DEBUG, gating=gating, n_shared_experts=0,
                              balance_bias=gating == "sigmoid")
    m = moe(cfg)
    d = m.dims
    with tracing(TraceContext("spec")) as tr:
        for dim in (d.B, d.S, d.H, d.E, d.FE):
            tr.record_dim(dim)
        x = inp("x", d.B, d.S, d.H)
        names = ["router", "experts.w1", "experts.w3", "experts.w2"]
        p = Params({n: inp(n, *m.params["layers.0.moe." + n]) for n in names})
        bias = inp("bias", d.E) if gating == "sigmoid" else None
        y, aux = moe_layer(p, x, cfg, d, MoEContext(), bias)
    rng = np.random.default_rng(5)
    shapes = {"x": (4, 4, 8), "router": (8, 4), "experts.w1": (4, 8, 4),
              "experts.w3": (4, 8, 4), "experts.w2": (4, 4, 8), "bias": (4,)}
    inputs = {k: rng.standard_normal(v) for k, v in shapes.items()}
    got = evaluate([y.term, aux.term], Binding({"B": 4, "S": 4, "H": 8, "E": 4, "FE": 4}), inputs)
    ry, raux = _numpy_moe_layer(inputs["x"].reshape(16, 8), inputs["router"],
                                inputs["experts.w1"], inputs["experts.w3"],
                                inputs["experts.w2"], inputs["bias"] if bias is not None else None, cfg)
    np.testing.assert_allclose(got[y.term].transpose_to(("B", "S", "H")).reshape(16, 8), ry,
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(float(got[aux.term].data), raux, rtol=1e-10)
    # balanced routing gives aux = 1 only with uniform probabilities; check it is positive
    assert float(got[aux.term].data) > 0
    assert Fraction(cfg.routed_scaling) == Fraction(5, 2)


def test_dispatch_then_combine_normalises_to_the_tokens_block() -> None:
    """all-to-all-def + allgather-shard cancel a dispatch / combine pair; the dispatched
    tokens are the experts' block of the global tensor."""
    from rewriting import build as rb
    from rewriting import normalise

    x = rb.inp("x_a2a", ["B", "E", "H"])
    local = rb.shard(x, "B", "ep")
    there = rb.all_to_all(local, "ep", "E", "B")
    back = rb.all_to_all(there, "ep", "B", "E")
    (nf_there, nf_back), _log = normalise([there, back], Binding(SIZES))
    assert nf_back is normalise([local], Binding(SIZES))[0][0]
    assert nf_there is normalise([rb.shard(x, "E", "ep")], Binding(SIZES))[0][0]
