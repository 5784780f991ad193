"""B55 buggy: Megatron-Bridge PR #4066 (+ #5555), heterogeneous MIMO: encoder DP != LLM DP
mis-scales the encoder gradients.

Spec: an encoder ``h = tanh(x W_enc)`` feeding an LLM layer ``W_llm`` and a masked token-mean
cross-entropy over the whole batch; SGD.
Plan: Mesh(dp=2). The encoder grid has DP E = 2 (each rank encodes its half of the batch,
``Shard(B)``); the LLM grid has DP D = 1: the bridge gathers the encoder outputs (all-gather
forward, this rank's block backward) and every rank runs the single LLM replica on the whole
batch, normalising by the tokens it processes. The encoder's DDP averages over its own E = 2
ranks, although each rank's encoder gradient already carries its D/E share of the samples:
encoder gradients come out ``D/E = 1/2`` of the spec (PR #4066: the shortfall is
encoder_dp/llm_dp).
Expected: NOT EQUIVALENT at ``grad:W_enc``: 0.500 x spec; the LLM's gradients are right.
Smallest configuration (CASES2.md B55): encoder DP 2, LLM DP 1, one encoder layer feeding one
LLM layer.
"""

from spec_lang import (
    SGD, Axis, Dim, Mesh, Plan, Shard, Spec, all_reduce, gather_from_tp_region, index, mask, ops,
    real,
)

DP = Axis.DP
B, S, X, H, V = Dim("B", 2), Dim("S", 2), Dim("X", 2), Dim("H", 2), Dim("V", 4)


def encode(p, x):
    return ops.tanh(ops.einsum(x, p["W_enc"], out=(x.dims[0], S, H)))


def llm_loss(p, h, d):
    logits = ops.einsum(h, p["W_llm"], out=(B, S, V))
    return ops.cross_entropy(logits, d["labels"], d["mask"], V)


spec = Spec(params={"W_enc": (X, H), "W_llm": (H, V)},
            data={"x": real(B, S, X), "labels": index(B, S, range=V), "mask": mask(B, S)},
            forward=lambda p, d: llm_loss(p, encode(p, d["x"]), d), optimizer=SGD())


def forward(p, d):
    h = gather_from_tp_region(encode(p, d["x"]), B, DP)     # bridge: encoder DP 2 -> LLM DP 1
    return llm_loss(p, h, d)                                # the LLM replica, whole batch


def reduce_grads(name, g):
    if name == "W_enc":
        return all_reduce(g, DP, "avg")                     # BUG: the encoder DDP's 1/E
    return g                                                # LLM DP 1: nothing to reduce


plan = Plan(mesh=Mesh(dp=2), placements={"x": {DP: Shard(B)}}, forward=forward,
            reduce_grads=reduce_grads)
