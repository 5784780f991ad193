"""B67 fixed: torchtitan #3280 / PR #3159, TP x CP: the reported loss reduced over the loss mesh.

Spec: one linear layer on a sequence, the masked token mean of the cross-entropy ``L = S / N``;
SGD. The reported loss is an output of the training step like the gradients.
Plan: Mesh(tp=2, cp=2): the sequence ``Shard(S)`` over cp (tp replicates this small model). Each
rank backprops ``S_c / N`` (N all-reduced over cp) and the gradients are summed over cp:
training is right. The logging reducer takes ``to_local()`` and all-reduces it explicitly over
the loss mesh (cp): the reported value is ``sum_c S_c / N``.
Expected: EQUIVALENT, with a certificate.
Smallest configuration (CASES2.md B67): TP2 x CP2.
"""

from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, index, mask, ops,
)

TP, CP = Axis.TP, Axis.CP
B, S, H, V = Dim("B", 1), Dim("S", 4), Dim("H", 2), Dim("V", 4)


def masked_ce_sum(p, d):
    logits = ops.einsum(ops.embedding(d["tokens"], p["emb"], V), p["head"], out=(B, S, V))
    return ops.sum(d["mask"] * ops.cross_entropy_per_token(logits, d["labels"], V))


spec = Spec(params={"emb": (V, H), "head": (H, V)},
            data={"tokens": index(B, S, range=V), "labels": index(B, S, range=V),
                  "mask": mask(B, S)},
            forward=lambda p, d: masked_ce_sum(p, d) / ops.sum(d["mask"]), optimizer=SGD())


def forward(p, d):
    n = all_reduce(ops.sum(d["mask"]), CP)                  # global token count
    local = masked_ce_sum(p, d) / n                         # S_c / N
    return Loss(backward=local, report=all_reduce(local, CP))     # over the loss mesh


seq = {CP: Shard(S)}
plan = Plan(mesh=Mesh(tp=2, cp=2), placements={"tokens": seq, "labels": seq, "mask": seq},
            forward=forward, reduce_grads=lambda name, g: all_reduce(g, CP))
