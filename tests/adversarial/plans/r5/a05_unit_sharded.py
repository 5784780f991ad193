"""Round 5, a05: G of size 2 sharded over tp = 2 (one element per rank, a size-1 block): the plan
squares each rank's local sum (a size-1 block: x_r^2) and never reduces over tp, the spec squares the global sum
((x_0 + x_1)^2): differ."""
from spec_lang import SGD, Axis, Dim, Mesh, Plan, Shard, Spec, ops, real

TP = Axis.TP
B, G = Dim("B", 4), Dim("G", 2)


def spec_loss(p, d):
    return ops.sum(ops.pow(ops.sum(d["x"], (G,)), 2) * p["w"]) / ops.dim_size(B)


def plan_loss(p, d):
    return ops.sum(ops.pow(ops.sum(d["x"], (G,)), 2) * p["w"]) / ops.dim_size(B)


spec = Spec(params={"w": (B,)}, data={"x": real(B, G)}, forward=spec_loss, optimizer=SGD())
plan = Plan(mesh=Mesh(tp=2), placements={"x": {TP: Shard(G)}}, forward=plan_loss)
