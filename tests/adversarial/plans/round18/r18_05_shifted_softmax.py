"""adv18 d5 (right over the reals): spec stable softmax over H of s = x w + b; plan exp(s - 1000) / sum_H exp(s - 1000)
(a constant shift: softmax is shift-invariant, equal over the reals; float64: exp(-1000) underflows, 0/0 = NaN in the plan on
every draw). Truth: EQUIVALENT; NOT EQUIVALENT is wrong."""
from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real

DP = Axis.DP
B, H = Dim("B", 4), Dim("H", 3)


def scores(p, d):
    return d["x"] * p["w"] + d["b"]


def spec_loss(p, d):
    return ops.sum(ops.softmax(scores(p, d), H) * d["y"]) / ops.dim_size(B)


def plan_loss(p, d):
    e = ops.exp(ops.add(scores(p, d), -1000))
    return ops.sum(e * ops.recip(ops.sum(e, H)) * d["y"]) / ops.dim_size(B)


spec = Spec(params={"w": (H,)}, data={"x": real(B, H), "b": real(B, H), "y": real(B, H)},
            forward=spec_loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=2), placements={"x": {DP: Shard(B)}, "b": {DP: Shard(B)},
                                         "y": {DP: Shard(B)}},
            forward=lambda p, d: Loss(backward=plan_loss(p, d),
                                      report=all_reduce(plan_loss(p, d), DP)),
            reduce_grads=lambda n, g: all_reduce(g, DP))
