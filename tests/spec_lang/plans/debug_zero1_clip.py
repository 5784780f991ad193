"""Debug Llama on Mesh(dp=2) with ZeRO-1 and global-norm gradient clipping.

Parameters are replicated; each dp rank owns one block of every parameter for the optimizer
step (``optimizer_placements``: Shard(first dim) over dp). Gradients are reduce-scattered over
dp into that block, the global squared norm is the sum of the blocks' squares all-reduced over
dp, the spec's clipping is applied, AdamW updates the block and all-gather rebuilds the
parameter.
"""

from fractions import Fraction

from spec_lang import (
    AdamW, Axis, Loss, Mesh, Plan, Shard, all_gather, all_reduce, ops, reduce_scatter,
)
from spec_lang.models import DEBUG, ParallelContext, llama

DP = Axis.DP
model = llama(DEBUG)
d = model.dims
spec = model.spec(AdamW(step=2), clip_grad_norm=Fraction(1, 2))
OWNED = {name: dims[0] for name, dims in model.params.items()}  # the dim ZeRO splits


class DataParallel(ParallelContext):
    def loss(self, logits, labels, mask, d):
        ce = ops.cross_entropy_per_token(logits, labels, d.V)
        return ops.sum(mask * ce) / all_reduce(ops.sum(mask), DP)


def grad_norm_sq(grads):
    local = None
    for g in grads.values():
        s = ops.sum(g * g)
        local = s if local is None else local + s
    return all_reduce(local, DP)


def forward(p, data):
    seed = model.forward(p, data, DataParallel())  # S_d / N: this rank's share of the loss
    return Loss(backward=seed, report=all_reduce(seed, DP))


plan = Plan(
    mesh=Mesh(dp=2),
    placements={"tokens": {DP: Shard(d.B)}, "labels": {DP: Shard(d.B)}, "mask": {DP: Shard(d.B)}},
    forward=forward,
    optimizer_placements={name: {DP: Shard(dim)} for name, dim in OWNED.items()},
    reduce_grads=lambda name, g: reduce_scatter(g, DP, OWNED[name]),
    gather_params=lambda name, p: all_gather(p, DP, OWNED[name]),
    grad_norm_sq=grad_norm_sq,
)
