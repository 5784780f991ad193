"""DP2 x 2 micro-batches, the generator re-created inside the traced forward (adversarial finding
F3): in reality every micro-batch re-seeds it and draws offsets 0.. again, so micro-batches 0 and
1 share masks. Expected: never EQUIVALENT (UNKNOWN with a note)."""
from fractions import Fraction

from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, microbatches, ops, real
from spec_lang.rng import RngStream

DP = Axis.DP
B, H = Dim("B", 4), Dim("H", 2)
P = Fraction(1, 10)


def f(p, d, rng):
    return ops.sum(ops.dropout(d["x"] * p["w"], P, rng, name="drop") * d["t"])


spec = Spec(params={"w": (H,)}, data={"x": real(B, H), "t": real(B, H)},
            forward=lambda p, d: f(p, d, None), optimizer=SGD())


def forward(p, d):
    rng = RngStream(1234, fork=("dp",))  # re-seeded in every micro-batch's forward
    local = f(p, d, rng)
    return Loss(backward=local, report=all_reduce(local, DP))


plan = Plan(mesh=Mesh(dp=2), forward=forward, placements={"x": {DP: Shard(B)}, "t": {DP: Shard(B)}},
            microbatches=microbatches(2, B), reduce_grads=lambda n, g: all_reduce(g, DP))
