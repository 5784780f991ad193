"""Round 5, a07: a06 at |G| = 2 (exp of a sum is not the sum of exps; max is not sum): differ."""
from spec_lang import SGD, Dim, Mesh, Plan, Spec, ops, real

B, G = Dim("B", 4), Dim("G", 2)


def spec_loss(p, d):
    return ops.sum(ops.sum(ops.exp(d["x"] * p["w"]), (G,))) / ops.dim_size(B)


def plan_loss(p, d):
    s = ops.sum(d["x"] * p["w"], (G,))
    z = ops.stop_gradient(ops.max(d["x"], (G,))) - ops.stop_gradient(ops.sum(d["x"], (G,)))
    return ops.sum(ops.exp(s) + z) / ops.dim_size(B)


spec = Spec(params={"w": (B, G)}, data={"x": real(B, G)}, forward=spec_loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=1), placements={}, forward=plan_loss)
