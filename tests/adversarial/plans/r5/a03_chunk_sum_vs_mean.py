"""Round 5, a03: spec sums silu over G (|G| = 1, block 0 of K renamed); the plan takes the mean
over K (|K| = 2): differ unless both blocks agree."""
from spec_lang import SGD, Dim, Mesh, Plan, Spec, ops, real

B, K, G = Dim("B", 4), Dim("K", 2), Dim("G", 1)


def spec_loss(p, d):
    y = ops.rename(ops.chunk(d["x"], K, 2, 0), K, G)
    return ops.sum(ops.silu(y) * p["w"]) / ops.dim_size(B)


def plan_loss(p, d):
    return ops.sum(ops.mean(ops.silu(d["x"]), (K,)) * p["w"]) / ops.dim_size(B)


spec = Spec(params={"w": (B,)}, data={"x": real(B, K)}, forward=spec_loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=1), placements={}, forward=plan_loss)
