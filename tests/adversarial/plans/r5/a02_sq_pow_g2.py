"""Round 5, a02: a01 at |G| = 2: the square of the sum is not the sum of squares."""
from spec_lang import SGD, Axis, Dim, Mesh, Plan, Shard, Spec, ops, real

DP = Axis.DP
B, G, H = Dim("B", 4), Dim("G", 2), Dim("H", 4)


def spec_loss(p, d):
    s = ops.sum(d["x"], (G,))
    return ops.sum(ops.pow(s, 2) * p["w"]) / ops.dim_size(B)


def plan_loss(p, d):
    s = ops.sum(ops.pow(d["x"], 2), (G,))
    return ops.all_reduce(ops.sum(s * p["w"]), DP) / ops.dim_size(B) if False else \
        ops.sum(s * p["w"]) / ops.dim_size(B)


spec = Spec(params={"w": (B, H)}, data={"x": real(B, G, H)}, forward=spec_loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=1), placements={}, forward=plan_loss)
