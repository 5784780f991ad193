"""B14 fixed: TransformerEngine #1677, Megatron-LM #1528, TP + CP together (FP8 code path).

Spec: ``y_i = rms_norm(x_i) * gamma`` (gamma: (H,)) over tokens i, a linear head (H, V), the
masked token-mean cross-entropy; ``dL/dgamma = sum over all tokens of delta_i * n(x_i)``.
Plan: Mesh(cp=2, tp=2): the sequence is split over cp, and each cp chunk again over tp (sequence
parallelism), S[cp, tp]; the norm runs on the rank's tokens with a replica of gamma; S is
all-gathered over tp before the column-parallel head (Shard(V)); the loss of the cp chunk is
``S_c / N``, N all-reduced over cp. gamma's local gradient is Partial over tp and cp: the right
reductions are exactly one AR_sum[tp] and one AR_sum[cp], for every (tp, cp); the head's
gradient (Shard(V) over tp) is summed over cp only.
Expected verdict: EQUIVALENT (also ``build(tp=2, cp=1)`` and ``build(tp=1, cp=2)``).
"""

from types import SimpleNamespace

from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, gather_from_sp_region, index,
    mask, ops, real,
)
from spec_lang.plans import vocab_parallel_cross_entropy

TP, CP = Axis.TP, Axis.CP
B, S, H, V = Dim("B", 1), Dim("S", 8), Dim("H", 2), Dim("V", 4)


def head_loss(p, d):
    y = ops.rms_norm(d["x"], p["norm"], H, 1e-5)
    logits = ops.einsum(y, p["head"], out=(B, S, V))
    return ops.cross_entropy(logits, d["labels"], d["mask"], V)


spec = Spec(params={"norm": (H,), "head": (H, V)},
            data={"x": real(B, S, H), "labels": index(B, S, range=V), "mask": mask(B, S)},
            forward=head_loss, optimizer=SGD())


def forward(p, d):
    y = ops.rms_norm(d["x"], p["norm"], H, 1e-5)            # (B, S[cp,tp], H)
    y = gather_from_sp_region(y, S, TP)                     # (B, S[cp], H)
    logits = ops.einsum(y, p["head"], out=(B, S, V))        # (B, S[cp], V[tp])
    ce = vocab_parallel_cross_entropy(logits, d["labels"], SimpleNamespace(B=B, S=S, V=V))
    local = ops.sum(d["mask"] * ce) / all_reduce(ops.sum(d["mask"]), CP)    # S_c / N
    return Loss(backward=local, report=all_reduce(local, CP))


def build(tp=2, cp=2):
    """(spec, plan) on Mesh(cp=cp, tp=tp)."""

    def reduce_grads(name, g):
        if name == "norm":
            g = all_reduce(g, TP)                           # sequence-parallel gradient, once
        return all_reduce(g, CP)                            # context-parallel chunks

    seq = {CP: Shard(S), TP: Shard(S)}
    return spec, Plan(mesh=Mesh(cp=cp, tp=tp),
                      placements={"x": seq, "labels": {CP: Shard(S)}, "mask": {CP: Shard(S)},
                                  "head": {TP: Shard(V)}},
                      forward=forward, reduce_grads=reduce_grads)


spec, plan = build()
