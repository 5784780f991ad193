"""B39 buggy: Megatron-LM #7452 finding 2, vocab-parallel cross-entropy on TP-gathered logits.

Spec: the masked token mean of the cross-entropy of ``logits = x @ head``:
``L = sum(mask * (log Z - z_y)) / sum(mask)``, ``Z = sum_v exp(z_v)``.
Plan (tp ranks): the head is column-parallel (``Shard(V)``), and with ``parallel_output=False``
the output layer all-gathers the logits over tp (``gather_from_tp_region``: every rank now holds
the full vocabulary row, a Replicate value). The loss still calls the vocab-parallel CE, which
reads its input's last dim as this rank's vocab shard ``[r |V_local|, (r+1) |V_local|)`` with
``|V_local|`` = the input's size (= |V| here): it all-reduces ``sum_v exp(z_v)`` over tp
(``tp * Z``) and finds the label in range on rank 0 only.
Expected: NOT EQUIVALENT: the loss is ``L + log(tp)`` (log 2 at tp = 2: the reported 1.1333369
vs 0.4401897 for logits [0, 1, 2, 3], label 3), and the head's gradient has the softmax part
divided by tp and the target term only on rank 0.
Smallest configuration (CASES2.md B39): tp = 2, V = 4, one position.
"""

from types import SimpleNamespace

from spec_lang import (
    SGD, Axis, Dim, Mesh, Plan, Shard, Spec, all_reduce, copy_to_tp_region,
    gather_from_tp_region, index, mask, ops, real, region,
)

TP = Axis.TP
B, S, H, V = Dim("B", 1), Dim("S", 1), Dim("H", 2), Dim("V", 4)
d = SimpleNamespace(B=B, S=S, V=V)


def spec_loss(p, data):
    logits = ops.einsum(data["x"], p["head"], out=(B, S, V))
    return ops.cross_entropy(logits, data["labels"], data["mask"], V)


spec = Spec(params={"head": (H, V)},
            data={"x": real(B, S, H), "labels": index(B, S, range=V), "mask": mask(B, S)},
            forward=spec_loss, optimizer=SGD())


def vocab_parallel_ce(logits, labels):
    """Megatron's ``_VocabParallelCrossEntropy`` as it reads its input (B, S, V): the last dim is
    this rank's vocab shard, starting at ``rank * |V_local|``; labels outside it are masked."""
    m = ops.stop_gradient(all_reduce(ops.max(logits, V), TP, "max"))
    sum_exp = region(ops.sum(ops.exp(logits - m), V), "reduce_from_tp", "all_reduce",
                     "identity", TP)
    start = ops.rank(TP) * ops.dim_size(V)                 # vocab_start_index
    target = ops.einsum(logits, ops.one_hot(labels - start, V), out=(B, S))
    target = region(target, "reduce_from_tp", "all_reduce", "identity", TP)
    return m + ops.log(sum_exp) - target


def forward(p, data):
    x = copy_to_tp_region(data["x"], TP)
    logits = gather_from_tp_region(ops.einsum(x, p["head"], out=(B, S, V)), V, TP)  # BUG
    ce = vocab_parallel_ce(logits, data["labels"])
    return ops.sum(data["mask"] * ce) / ops.sum(data["mask"])


plan = Plan(mesh=Mesh(tp=2), placements={"head": {TP: Shard(V)}}, forward=forward)
