"""Round 5, a04: (sum_G y0)^2 with y0 block 0 of K renamed to G (|G| = 1) vs sum_G(y1^2) with y1
block 1: differ (the blocks are different inputs)."""
from spec_lang import SGD, Dim, Mesh, Plan, Spec, ops, real

B, K, G = Dim("B", 4), Dim("K", 2), Dim("G", 1)


def _blk(x, i):
    return ops.rename(ops.chunk(x, K, 2, i), K, G)


def spec_loss(p, d):
    return ops.sum(ops.pow(ops.sum(_blk(d["x"], 0), (G,)), 2) * p["w"]) / ops.dim_size(B)


def plan_loss(p, d):
    return ops.sum(ops.sum(ops.pow(_blk(d["x"], 1), 2), (G,)) * p["w"]) / ops.dim_size(B)


spec = Spec(params={"w": (B,)}, data={"x": real(B, K)}, forward=spec_loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=1), placements={}, forward=plan_loss)
