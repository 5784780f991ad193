"""Round 17 (right over the reals, a common idiom): the spec averages each sequence's loss over
its token count n = sum_S m (0 for a fully padded sequence: 0/0, the spec is undefined there);
the plan divides by max(n, 1), as training code often does. Where the spec is defined (n >= 1)
max(n, 1) = n. Truth: equal wherever the spec is defined -> EQUIVALENT or UNKNOWN; NOT
EQUIVALENT is wrong (its witness is a padded sequence, outside the spec's domain)."""
from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, mask, ops, real

DP = Axis.DP
B, S, H = Dim("B", 4), Dim("S", 2), Dim("H", 2)


def per_seq(p, d, n):
    return ops.sum(ops.sum(d["m"] * ops.einsum(d["x"], p["w"], out=(B, S)), S) * ops.recip(n)) \
        / ops.dim_size(B)


def spec_loss(p, d):
    return per_seq(p, d, ops.sum(d["m"], S))


def plan_loss(p, d):
    return per_seq(p, d, ops.maximum(ops.sum(d["m"], S), 1))


spec = Spec(params={"w": (H,)}, data={"x": real(B, S, H), "m": mask(B, S)}, forward=spec_loss,
            optimizer=SGD())
plan = Plan(mesh=Mesh(dp=2), placements={"x": {DP: Shard(B)}, "m": {DP: Shard(B)}},
            forward=lambda p, d: Loss(backward=plan_loss(p, d),
                                      report=all_reduce(plan_loss(p, d), DP)),
            reduce_grads=lambda n, g: all_reduce(g, DP))
