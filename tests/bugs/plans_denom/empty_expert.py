"""Issue 10, family 3, empty-expert variant: top-1 routing with a selection-only bias (as
DeepSeek-V3's ``e_score_correction_bias``); the plan scales each expert's routing weights by
``count_e / count_e`` with ``count_e`` the tokens routed to expert e over the whole batch: NaN
when an expert receives no tokens, which the spec allows. Expected: NOT EQUIVALENT (an empty
expert), never EQUIVALENT."""

from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real

DP = Axis.DP
B, H, E, F = Dim("B", 8), Dim("H", 4), Dim("E", 4), Dim("F", 4)


def routing(p, d):
    """Top-1 expert per token, selected on ``x @ router + bias``: (B, E), 0/1."""
    return ops.topk_mask(ops.einsum(d["x"], p["router"], out=(B, E)) + d["bias"], E, 1)


def experts(p, d):
    """Every expert's output for every token: (B, E, F)."""
    return ops.einsum(d["x"], p["w"], out=(B, E, F))


spec = Spec(params={"router": (H, E), "w": (E, H, F)},
            data={"x": real(B, H), "t": real(B, F), "bias": real(E)},
            forward=lambda p, d: ops.sum(ops.einsum(routing(p, d), experts(p, d), out=(B, F))
                                         * d["t"]),
            optimizer=SGD())


def forward(p, d):
    m = routing(p, d)
    count = all_reduce(ops.sum(m, B), DP)                           # (E,) tokens per expert
    out = ops.einsum(m * (count / count), experts(p, d), out=(B, F))
    local = ops.sum(out * d["t"])
    return Loss(backward=local, report=all_reduce(local, DP))


plan = Plan(mesh=Mesh(dp=2), forward=forward,
            placements={"x": {DP: Shard(B)}, "t": {DP: Shard(B)}},
            reduce_grads=lambda name, g: all_reduce(g, DP))
