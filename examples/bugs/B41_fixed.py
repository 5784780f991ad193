"""B41 fixed: Megatron-LM #7452 finding 4, MTP full recompute splits / regathers the saved
activation over the layer's own TP group.

Spec: a token embedding, one MLP layer ``y = x + silu(x W1) W2`` (the MTP layer's MLP), the head
and the masked token-mean cross-entropy; SGD.
Plan: Mesh(dp=2, tp=2), 4 ranks: the layer's TP group is ``tp`` ({0,1}, {2,3}), the global MPU
"TP group" that the checkpoint code used is the other axis, ``dp`` ({0,2}, {1,3}). The MLP is
Megatron TP (W1, W2 ``Shard(F)``; copy_to / reduce_from regions) under full activation recompute
with distributed saved activations: the checkpoint keeps a 1/n chunk of the layer input and
re-gathers it before recomputing (``hooks.recompute`` with ``hooks.split_and_gather``). The
split and gather run over the layer's own group ``tp`` (``self.tp_group``, PR #7403), on which
the layer input is the same tensor: the rebuilt input is the forward's input.
Expected: EQUIVALENT, with a certificate.
Smallest configuration (CASES2.md B41, derived): 4 ranks, layer TP groups {0,1},{2,3}, global
TP groups {0,2},{1,3}, one MTP layer, full recompute.
"""

from fractions import Fraction

from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, copy_to_tp_region, index, mask,
    ops, reduce_from_tp_region,
)
from spec_lang.hooks import recompute, split_and_gather

DP, TP = Axis.DP, Axis.TP
B, S, H, F, V = Dim("B", 2), Dim("S", 2), Dim("H", 2), Dim("F", 4), Dim("V", 4)
RECOMPUTE_GROUP = TP            # the layer's own group (the forward's)


def mlp(p, x, tp):
    h = copy_to_tp_region(x, TP) if tp else x
    out = ops.einsum(ops.silu(ops.einsum(h, p["W1"], out=(B, S, F))), p["W2"], out=(B, S, H))
    return x + (reduce_from_tp_region(out, TP) if tp else out)


def ce_sum(p, d, y):
    logits = ops.einsum(y, p["head"], out=(B, S, V))
    return ops.sum(d["mask"] * ops.cross_entropy_per_token(logits, d["labels"], V))


def spec_loss(p, d):
    x = ops.embedding(d["tokens"], p["emb"], V)
    return ce_sum(p, d, mlp(p, x, tp=False)) / ops.sum(d["mask"])


spec = Spec(params={"emb": (V, H), "W1": (H, F), "W2": (F, H), "head": (H, V)},
            data={"tokens": index(B, S, range=V), "labels": index(B, S, range=V),
                  "mask": mask(B, S)},
            forward=spec_loss, optimizer=SGD(lr=Fraction(1, 10)))


def forward(p, d):
    x = ops.embedding(d["tokens"], p["emb"], V)
    y = recompute(lambda t: mlp(p, t, tp=True), x, split_and_gather(x, RECOMPUTE_GROUP, S))
    n = all_reduce(ops.sum(d["mask"]), DP)
    local = ce_sum(p, d, y) / n
    return Loss(backward=local, report=all_reduce(local, DP))


batch = {DP: Shard(B)}
plan = Plan(mesh=Mesh(dp=2, tp=2),
            placements={"tokens": batch, "labels": batch, "mask": batch,
                        "W1": {TP: Shard(F)}, "W2": {TP: Shard(F)}},
            forward=forward, reduce_grads=lambda name, g: all_reduce(g, DP))
