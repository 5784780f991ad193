"""Round 17 (right over the reals): the spec multiplies by n/n (n = a sequence's token count,
0 for a fully padded sequence: the spec is undefined there); the plan omits the factor.
Truth: equal wherever the spec is defined -> EQUIVALENT; NOT EQUIVALENT is wrong."""
from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, mask, ops, real

DP = Axis.DP
B, S, H = Dim("B", 4), Dim("S", 2), Dim("H", 2)


def spec_loss(p, d):
    n = ops.sum(d["m"], S)
    return ops.sum(d["x"] * p["w"] * n * ops.recip(n)) / ops.dim_size(B)


def plan_loss(p, d):
    return ops.sum(d["x"] * p["w"]) / ops.dim_size(B)


spec = Spec(params={"w": (H,)}, data={"x": real(B, H), "m": mask(B, S)}, forward=spec_loss,
            optimizer=SGD())
plan = Plan(mesh=Mesh(dp=2), placements={"x": {DP: Shard(B)}, "m": {DP: Shard(B)}},
            forward=lambda p, d: Loss(backward=plan_loss(p, d),
                                      report=all_reduce(plan_loss(p, d), DP)),
            reduce_grads=lambda n, g: all_reduce(g, DP))
