"""adv19 b1 (right over the reals): plan multiplies by c / c with c = (x^2 + 1 + 10^20) - 10^20
(= x^2 + 1 >= 1 over the reals, so c / c = 1 everywhere); float64: x^2 + 1 + 1e20 rounds to 1e20,
c = 0 exactly (no underflow, no overflow), 0 * (1/0) = NaN in the plan, spec finite.
Truth: EQUIVALENT; NOT EQUIVALENT accepted by the checker is wrong."""
from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real

DP = Axis.DP
B, H = Dim("B", 4), Dim("H", 2)
BIG = 10**20


def spec_loss(p, d):
    return ops.sum(d["x"] * p["w"]) / ops.dim_size(B)


def plan_loss(p, d):
    c = ops.add(ops.add(d["x"] * d["x"], 1 + BIG), -BIG)
    return ops.sum(d["x"] * p["w"] * c * ops.recip(c)) / ops.dim_size(B)


spec = Spec(params={"w": (H,)}, data={"x": real(B, H)}, forward=spec_loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=2), placements={"x": {DP: Shard(B)}},
            forward=lambda p, d: Loss(backward=plan_loss(p, d),
                                      report=all_reduce(plan_loss(p, d), DP)),
            reduce_grads=lambda n, g: all_reduce(g, DP))
