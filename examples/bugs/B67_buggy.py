"""B67 buggy: torchtitan #3280, TP x CP: the reported loss is not reduced over CP (logging only).

Spec: one linear layer on a sequence, the masked token mean of the cross-entropy ``L = S / N``;
SGD. The reported loss is an output of the training step like the gradients.
Plan: Mesh(tp=2, cp=2): the sequence ``Shard(S)`` over cp (tp replicates this small model). Each
rank backprops ``S_c / N`` (N all-reduced over cp) and the gradients are summed over cp:
training is right. The logged loss is a DTensor on the tp mesh; the logging reducer called
``full_tensor()``, which reduces only over the DTensor's own mesh (tp, where the value is
replicated) and returned early, skipping the requested reduction over the loss mesh (cp): the
reported value is ``S_c / N``, this rank's share.
Expected: NOT EQUIVALENT at ``loss`` (values: the rank's share, about 1/cp of the spec on even
masks); every gradient goal is right.
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


def full_tensor_on_tp_mesh(x):
    """``DTensor.full_tensor()`` of a value Replicate on its (tp) mesh: the value itself."""
    return x


def forward(p, d):
    n = all_reduce(ops.sum(d["mask"]), CP)                  # global token count
    local = masked_ce_sum(p, d) / n                         # S_c / N
    return Loss(backward=local, report=full_tensor_on_tp_mesh(local))   # BUG: no cp reduction


seq = {CP: Shard(S)}
plan = Plan(mesh=Mesh(tp=2, cp=2), placements={"tokens": seq, "labels": seq, "mask": seq},
            forward=forward, reduce_grads=lambda name, g: all_reduce(g, CP))
