"""adv18 d1 (right over the reals): the plan multiplies by e^{-u} / e^{-u} with u = 800 + x^2
(exactly 1 over the reals; in float64 e^{-u} underflows to 0, so 0 * (1/0) = NaN in the plan
while the spec is finite). Truth: EQUIVALENT; NOT EQUIVALENT accepted by the checker is wrong."""
from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real

DP = Axis.DP
B, H = Dim("B", 4), Dim("H", 2)


def spec_loss(p, d):
    return ops.sum(d["x"] * p["w"]) / ops.dim_size(B)


def plan_loss(p, d):
    e = ops.exp(ops.neg(ops.add(d["x"] * d["x"], 800)))
    return ops.sum(d["x"] * p["w"] * e * ops.recip(e)) / ops.dim_size(B)


spec = Spec(params={"w": (H,)}, data={"x": real(B, H)}, forward=spec_loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=2), placements={"x": {DP: Shard(B)}},
            forward=lambda p, d: Loss(backward=plan_loss(p, d),
                                      report=all_reduce(plan_loss(p, d), DP)),
            reduce_grads=lambda n, g: all_reduce(g, DP))
