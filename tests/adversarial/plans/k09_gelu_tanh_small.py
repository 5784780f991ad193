"""Adversarial round 2 (exact constants): a small correct plan with GPT-2's tanh GELU, whose
constant sqrt(2/pi) is ``[["1/1", [["2", "1/2"], ["pi", "-1/2"]]]]`` in a certificate."""
from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real

DP = Axis.DP
B, H = Dim("B", 8), Dim("H", 4)


def loss(p, d):
    return ops.sum(ops.gelu(d["x"] * p["w"], approximate="tanh")) / ops.dim_size(B)


spec = Spec(params={"w": (H,)}, data={"x": real(B, H)}, forward=loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=2), placements={"x": {DP: Shard(B)}},
            forward=lambda p, d: Loss(backward=loss(p, d), report=all_reduce(loss(p, d), DP)),
            reduce_grads=lambda n, g: all_reduce(g, DP))
