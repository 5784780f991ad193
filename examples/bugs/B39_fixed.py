"""B39 fixed: Megatron-LM #7452 finding 2, vocab-parallel cross-entropy on TP-gathered logits.

Spec: as B39_buggy.py, ``L = sum(mask * (log Z - z_y)) / sum(mask)``.
Plan (tp ranks): the head is column-parallel (``Shard(V)``) and the logits stay vocab-sharded
(``parallel_output=True``): the vocab-parallel CE gets the ``Shard(V)`` logits its contract
requires (the library's ``vocab_parallel_cross_entropy``: all-reduced max, sum of exponentials
and target logit over tp).
Expected: EQUIVALENT, with a certificate.
Smallest configuration (CASES2.md B39): tp = 2, V = 4, one position.
"""

from types import SimpleNamespace

from spec_lang import (
    SGD, Axis, Dim, Mesh, Plan, Shard, Spec, copy_to_tp_region, index, mask, ops, real,
)
from spec_lang.plans import vocab_parallel_cross_entropy

TP = Axis.TP
B, S, H, V = Dim("B", 1), Dim("S", 1), Dim("H", 2), Dim("V", 4)
d = SimpleNamespace(B=B, S=S, V=V)


def spec_loss(p, data):
    logits = ops.einsum(data["x"], p["head"], out=(B, S, V))
    return ops.cross_entropy(logits, data["labels"], data["mask"], V)


spec = Spec(params={"head": (H, V)},
            data={"x": real(B, S, H), "labels": index(B, S, range=V), "mask": mask(B, S)},
            forward=spec_loss, optimizer=SGD())


def forward(p, data):
    x = copy_to_tp_region(data["x"], TP)
    logits = ops.einsum(x, p["head"], out=(B, S, V))        # (B, S, V[tp]): parallel output
    ce = vocab_parallel_cross_entropy(logits, data["labels"], d)
    return ops.sum(data["mask"] * ce) / ops.sum(data["mask"])


plan = Plan(mesh=Mesh(tp=2), placements={"head": {TP: Shard(V)}}, forward=forward)
