"""adv19 c1 (right over the reals): the R18-2 class (an underflow's 0 / 0) through an einsum, whose
underflow numpy does not flag (np.einsum without optimize: no FP-error check). u = (x^2 + 1) 10^-200,
s = sum_H u u = 10^-400 sum_H (x^2 + 1)^2 > 0 everywhere over the reals, so s / s = 1; float64: every
product underflows to 0 inside np.einsum (unflagged), s = 0, plan NaN, spec finite.
Truth: EQUIVALENT; NOT EQUIVALENT accepted by the checker is wrong."""
from fractions import Fraction

from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real

DP = Axis.DP
B, H = Dim("B", 4), Dim("H", 2)
TINY = Fraction(1, 10**200)


def spec_loss(p, d):
    return ops.sum(d["x"] * p["w"]) / ops.dim_size(B)


def plan_loss(p, d):
    u = ops.add(d["x"] * d["x"], 1) * TINY
    s = ops.einsum(u, u, out=(B,))
    return ops.sum(d["x"] * p["w"] * s * ops.recip(s)) / ops.dim_size(B)


spec = Spec(params={"w": (H,)}, data={"x": real(B, H)}, forward=spec_loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=2), placements={"x": {DP: Shard(B)}},
            forward=lambda p, d: Loss(backward=plan_loss(p, d),
                                      report=all_reduce(plan_loss(p, d), DP)),
            reduce_grads=lambda n, g: all_reduce(g, DP))
