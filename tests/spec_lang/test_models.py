"""The Llama model library: configs, registry, gradients, and walkers on a 128-layer model."""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import pytest

from sl_helpers import values
from spec_lang import AdamW, SGD, lower, trace_spec
from spec_lang.autodiff import grad
from spec_lang.errors import SpecError
from spec_lang.evaluate import sample_inputs
from spec_lang.models import DEBUG, LLAMA3_8B, MODELS, llama, model_registry
from spec_lang.term import Binding, Op, varying_axes, walk


def test_llama3_8b_config_matches_anchors_and_has_8_03b_parameters() -> None:
    c = LLAMA3_8B
    assert (c.hidden, c.n_layers, c.n_heads, c.n_kv_heads, c.ffn_hidden, c.vocab) == \
        (4096, 32, 32, 8, 14336, 128256)
    assert c.rope_theta == 500000 and c.norm_eps * 10**5 == 1 and c.head_dim == 128
    m = llama(c)
    n = sum(int(np.prod([d.size for d in dims])) for dims in m.params.values())
    assert n == 8_030_261_248  # Meta's published count for Llama-3-8B (untied head)


def test_debug_config_has_fewer_kv_heads_and_the_registry_knows_it() -> None:
    assert DEBUG.n_layers == 2 and DEBUG.n_kv_heads < DEBUG.n_heads
    assert model_registry("debug").config is DEBUG
    assert model_registry("llama3_8b").config is LLAMA3_8B
    assert {"debug", "llama3_8b"} <= set(MODELS)
    with pytest.raises(SpecError, match="unknown model 'gpt5'; known"):
        model_registry("gpt5")


def test_llama3_8b_spec_traces_symbolically() -> None:
    it = trace_spec(llama(LLAMA3_8B).spec(AdamW()))
    assert it.sizes["V"] == 128256 and it.sizes["HD_half"] == 64 and it.sizes["T"] == 8192
    assert len(it.outputs) == 1 + 4 * len(llama(LLAMA3_8B).params)


def test_debug_llama_gradient_matches_finite_differences() -> None:
    """Directional derivative of the loss along a random direction, central differences."""
    it = trace_spec(llama(DEBUG).spec(SGD()))
    loss = it.outputs["loss"]
    names = [k[5:] for k in it.outputs if k.startswith("grad:")]
    grads = [it.outputs[f"grad:{k}"] for k in names]
    b = Binding(it.sizes)
    rng = np.random.default_rng(0)
    inputs = sample_inputs([loss], b, rng)
    for k in names:
        inputs[k] = inputs[k] * 0.5
    direction = {k: rng.standard_normal(inputs[k].shape) for k in names}
    vals = values([loss, *grads], it.sizes, inputs)
    gtv = 0.0
    inputs_dims = {n.attrs[0]: n.dim_names for n in walk(loss) if n.op is Op.INPUT}
    for k, g in zip(names, grads):
        gtv += float(np.sum(vals[g].transpose_to(inputs_dims[k]) * direction[k]))
    h = 1e-5

    def at(s: float) -> float:
        shifted = {k: (v + s * direction[k] if k in direction else v) for k, v in inputs.items()}
        return float(values([loss], it.sizes, shifted)[loss].data)

    fd = (at(h) - at(-h)) / (2 * h)
    assert abs(fd - gtv) <= 1e-6 * max(1.0, abs(gtv)), (fd, gtv)


def test_walkers_on_a_128_layer_model() -> None:
    """trace, grad, walk, lower and varying_axes on 128 layers, with a low recursion limit."""
    m = llama(dataclasses.replace(DEBUG, n_layers=128))
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(400)
    try:
        it = trace_spec(m.spec(AdamW()))
        roots = list(it.outputs.values())
        nodes = walk(roots)
        low = lower(roots)
        v = varying_axes(it.outputs["loss"])
        (g0,) = grad(it.outputs["loss"], [next(n for n in nodes if n.op is Op.INPUT and
                                               n.attrs[0] == "layers.0.mlp.w1")])
    finally:
        sys.setrecursionlimit(old)
    assert len(it.outputs) == 1 + 4 * (2 + 9 * 128 + 1)
    assert len(nodes) > 30_000 and v == frozenset()
    assert low == roots  # no REGION in a spec: lower is the identity, node for node
    assert g0 is it.outputs["grad:layers.0.mlp.w1"]  # same construction, same hash-consed node


def test_a_128_layer_tp_plan_builds_its_problem_without_recursion() -> None:
    from spec_lang import Mesh, Plan, Shard, build_problem  # noqa: PLC0415
    from spec_lang.collectives import copy_to_tp_region, reduce_from_tp_region  # noqa: PLC0415
    from spec_lang.models import ParallelContext  # noqa: PLC0415

    class TP(ParallelContext):
        def enter_tp(self, x, d):
            return copy_to_tp_region(x, "tp")

        def exit_tp(self, x, d):
            return reduce_from_tp_region(x, "tp")

    m = llama(dataclasses.replace(DEBUG, n_layers=128))
    d = m.dims
    shard = {"attn.wq": d.KVH, "attn.wk": d.KVH, "attn.wv": d.KVH, "attn.wo": d.KVH,
             "mlp.w1": d.F, "mlp.w3": d.F, "mlp.w2": d.F}
    plan = Plan(mesh=Mesh(tp=2), forward=lambda p, data: m.forward(p, data, TP()),
                placements={f"layers.{i}.{k}": {"tp": Shard(v)} for i in range(128)
                            for k, v in shard.items()})
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(400)
    try:
        pr = build_problem(m.spec(SGD()), plan)
        nodes = walk([g.actual for g in pr.goals] + [g.expected for g in pr.goals])
    finally:
        sys.setrecursionlimit(old)
    assert len(pr.goals) == 1 + 2 * (2 + 9 * 128 + 1)
    assert not any(n.op is Op.REGION for n in nodes)
    assert sum(n.op is Op.ALL_REDUCE for n in nodes) >= 4 * 128  # f's backward and g's forward
    layer = {g.layer for g in pr.goals if g.layer}
    assert len(layer) == 128
