"""B45 buggy: Megatron-LM PR #6048, distributed-optimizer shards sized by the full DP x CP group
with several optimizer instances (trailing shards never updated).

Spec: four weights w0..w3 (each (K, H)) of one linear model summed into one output, squared
error, SGD: every weight is updated, ``w' = w - lr g``.
Plan: Mesh(dp_replicate=2, dp_shard=2): ``--num-distributed-optimizer-instances 2``, so DDP
reduce-scatters / all-gathers over the instance group of R = 2 ranks (``dp_shard``) while the
bucket ``[w0 | w1 | w2 | w3]`` was laid out for the full dp x cp group of 4 shards
(``FlatBuffer(..., DP_SHARD, 4)``). Gradients are reduced correctly (all-reduce average over
both axes), but shard ``s`` of the bucket is stepped by rank ``s`` of the instance group, and
shards 2 and 3 have no such rank: ``optimizer_owners`` =
``bucket.ownership(name, group_size=2)`` gives w2 and w3 no owner, and the all-gather never
writes them.
Expected: NOT EQUIVALENT at the updated weight ``w2`` (values: spec ``w - lr g``, plan ``w``)
and ``w3``; every gradient goal is right.
Smallest configuration (CASES2.md B45, derived): dp = 4, I = 2 (R = 2), one bucket with 4
parameters.
"""

from fractions import Fraction

from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real
from spec_lang.plans.sharded_dp import FlatBuffer

DPR, DPS = Axis.DP_REPLICATE, Axis.DP_SHARD
B, K, H = Dim("B", 4), Dim("K", 2), Dim("H", 2)
NAMES = ("w0", "w1", "w2", "w3")


def sq_err_sum(p, d):
    y = sum((ops.einsum(d["x"], p[n], out=(B, H)) for n in NAMES[1:]),
            ops.einsum(d["x"], p[NAMES[0]], out=(B, H)))
    r = y - d["t"]
    return ops.sum(r * r)


spec = Spec(params={n: (K, H) for n in NAMES}, data={"x": real(B, K), "t": real(B, H)},
            forward=lambda p, d: sq_err_sum(p, d) / ops.dim_size(B),
            optimizer=SGD(lr=Fraction(1, 10)))

bucket = FlatBuffer(spec.params, DPS, 4)        # BUG: sized for dp x cp = 4 shards


def forward(p, d):
    local = sq_err_sum(p, d) / ops.dim_size(B)             # this rank's share of the mean
    return Loss(backward=local, report=all_reduce(all_reduce(local, DPR), DPS))


batch = {DPR: Shard(B), DPS: Shard(B)}
plan = Plan(mesh=Mesh(dp_replicate=2, dp_shard=2), placements={"x": batch, "t": batch},
            forward=forward,
            reduce_grads=lambda name, g: all_reduce(all_reduce(g, DPR), DPS),
            optimizer_owners={n: bucket.ownership(n, group_size=2) for n in NAMES})
