"""Round 17 (right, provable by rewriting): spec 10^6 (1 + erf(((x w/1000 + 10^10) - 10^10) - 9/2)),
plan 10^6 (1 + erf(x w/1000 - 9/2)): 10^10 - 10^10 cancels (add-canon). float64: the spec's
argument carries ~1e-6 of rounding (ulp of 10^10) and 1 + erf(~-4.5) ~ 2e-10 cancels, so the two
sides differ by ~1e-5 relative. Truth: EQUIVALENT."""
from fractions import Fraction

from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real

DP = Axis.DP
B, H = Dim("B", 4), Dim("H", 2)
BIG, K, C = 10**10, 10**6, 11


def spec_loss(p, d):
    u = ops.add(ops.add(ops.add(d["x"] * p["w"] * Fraction(1, 1000), BIG), -BIG), -C)
    return ops.sum(K * (1 + ops.tanh(u))) / ops.dim_size(B)


def plan_loss(p, d):
    u = ops.add(d["x"] * p["w"] * Fraction(1, 1000), -C)
    return ops.sum(K * (1 + ops.tanh(u))) / ops.dim_size(B)


spec = Spec(params={"w": (H,)}, data={"x": real(B, H)}, forward=spec_loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=2), placements={"x": {DP: Shard(B)}},
            forward=lambda p, d: Loss(backward=plan_loss(p, d),
                                      report=all_reduce(plan_loss(p, d), DP)),
            reduce_grads=lambda n, g: all_reduce(g, DP))
