"""B55 fixed: Megatron-Bridge PR #4066, heterogeneous MIMO: encoder gradients scaled by E/D.

Spec: an encoder ``h = tanh(x W_enc)`` feeding an LLM layer ``W_llm`` and a masked token-mean
cross-entropy over the whole batch; SGD.
Plan: Mesh(dp=2). The encoder grid has DP E = 2 (each rank encodes its half of the batch,
``Shard(B)``); the LLM grid has DP D = 1: the bridge gathers the encoder outputs (all-gather
forward, this rank's block backward) and every rank runs the single LLM replica on the whole
batch, normalising by the tokens it processes. The encoder's DDP average over its E ranks is
multiplied by ``E/D`` (PR #4066 reads each module's DP size from its grid): the encoder
gradient is the sum of the ranks' shares.
Expected: EQUIVALENT, with a certificate.
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
        e_over_d = ops.axis_size(DP) / 1                    # encoder DP E / LLM DP D
        return e_over_d * all_reduce(g, DP, "avg")          # the encoder DDP's 1/E, times E/D
    return g                                                # LLM DP 1: nothing to reduce


plan = Plan(mesh=Mesh(dp=2), placements={"x": {DP: Shard(B)}}, forward=forward,
            reduce_grads=reduce_grads)
