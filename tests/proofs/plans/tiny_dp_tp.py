"""A tiny two-layer MLP on Mesh(dp=2, tp=2): column-parallel w1, row-parallel w2, batch over dp.

The loss is the batch mean of a squared output: each rank backprops its addend (it divides by
the global batch size) and logs the sum over dp; gradients are summed over dp, then SGD runs on
the local shards.
"""

from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real
from spec_lang import copy_to_tp_region, reduce_from_tp_region

DP, TP = Axis.DP, Axis.TP
B, H, F = Dim("B", 8), Dim("H", 4), Dim("F", 8)


def model(p, d, enter=lambda x: x, exit_=lambda x: x):
    h = ops.silu(ops.einsum(enter(d["x"]), p["w1"], out=(B, F)))
    y = exit_(ops.einsum(h, p["w2"], out=(B, H)))
    return ops.sum(y * y) / ops.dim_size(B)


spec = Spec(params={"w1": (H, F), "w2": (F, H)}, data={"x": real(B, H)},
            forward=model, optimizer=SGD())


def forward(p, d):
    loss = model(p, d, lambda x: copy_to_tp_region(x, TP), lambda y: reduce_from_tp_region(y, TP))
    return Loss(backward=loss, report=all_reduce(loss, DP))  # the logged loss is global


plan = Plan(mesh=Mesh(dp=2, tp=2),
            placements={"w1": {TP: Shard(F)}, "w2": {TP: Shard(F)}, "x": {DP: Shard(B)}},
            forward=forward,
            reduce_grads=lambda name, g: all_reduce(g, DP, "sum"))
