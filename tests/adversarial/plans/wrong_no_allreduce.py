"""Adversarial round 2: a wrong plan that writes nothing (no data-parallel all-reduce: the loss
and ``grad:w`` are each rank's half, 1/|dp| of the spec's). The right verdict is NOT EQUIVALENT."""
from spec_lang import SGD, Axis, Dim, Mesh, Plan, Shard, Spec, ops, real

DP = Axis.DP
B, H = Dim("B", 8), Dim("H", 4)


def loss(p, d):
    return ops.sum(d["x"] * p["w"]) / ops.dim_size(B)


spec = Spec(params={"w": (H,)}, data={"x": real(B, H)}, forward=loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=2), placements={"x": {DP: Shard(B)}}, forward=loss)  # no all_reduce
