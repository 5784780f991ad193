"""B12 buggy: Megatron-LM #1446, TransformerEngine PR #1528, TP + sequence parallelism.

Spec: ``y_i = rms_norm(x_i) * gamma`` over tokens i (gamma: (H,)), then a linear head (H, V) and
the masked token-mean cross-entropy; ``dL/dgamma = sum_i delta_i * n(x_i)`` over all tokens.
Plan (Megatron SP): Mesh(tp=2); the norm runs on sequence shards, Shard(S) over tp (rank t holds
tokens T_t, |T_t| = S/tp), with a full replica of gamma; ``gather_from_sp_region`` all-gathers S
before the column-parallel head (Shard(V)), whose vocab-parallel cross-entropy every rank
computes. Rank t's gamma gradient is ``sum_{i in T_t}``: Partial over tp. The norm module lost
the attribute that schedules its TP all-reduce, so the partial gradient reaches SGD unreduced.
Smallest configuration (CASES.md): tp=2, SP on, S=2 (one token per rank), RMSNorm -> linear head.
Expected verdict: NOT EQUIVALENT; first diverging goal ``grad:norm`` on one tp rank (values
differ per rank: each holds its tokens' share), then the updated ``norm`` replicas drift apart.
"""

from types import SimpleNamespace

from spec_lang import (
    SGD, Axis, Dim, Mesh, Plan, Shard, Spec, gather_from_sp_region, index, mask, ops, real,
)
from spec_lang.plans import vocab_parallel_cross_entropy

TP = Axis.TP
B, S, H, V = Dim("B", 1), Dim("S", 2), Dim("H", 2), Dim("V", 4)


def head_loss(p, d):
    y = ops.rms_norm(d["x"], p["norm"], H, 1e-5)
    logits = ops.einsum(y, p["head"], out=(B, S, V))
    return ops.cross_entropy(logits, d["labels"], d["mask"], V)


spec = Spec(params={"norm": (H,), "head": (H, V)},
            data={"x": real(B, S, H), "labels": index(B, S, range=V), "mask": mask(B, S)},
            forward=head_loss, optimizer=SGD())


def forward(p, d):
    y = ops.rms_norm(d["x"], p["norm"], H, 1e-5)            # (B, S[tp], H): this rank's tokens
    y = gather_from_sp_region(y, S, TP)                     # (B, S, H); backward reduce-scatter
    logits = ops.einsum(y, p["head"], out=(B, S, V))        # (B, S, V[tp]): column-parallel
    ce = vocab_parallel_cross_entropy(logits, d["labels"], SimpleNamespace(B=B, S=S, V=V))
    return ops.sum(d["mask"] * ce) / ops.sum(d["mask"])


plan = Plan(mesh=Mesh(tp=2),
            placements={"x": {TP: Shard(S)}, "head": {TP: Shard(V)}},
            forward=forward,
            reduce_grads=lambda name, g: g)                 # no TP all-reduce for gamma
