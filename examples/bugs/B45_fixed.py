"""B45 fixed: Megatron-LM PR #6048, distributed-optimizer shards sized by the full DP x CP group
with several optimizer instances: the layout sized for the instance group.

Spec: four weights w0..w3 (each (K, H)) of one linear model summed into one output, squared
error, SGD: every weight is updated, ``w' = w - lr g``.
Plan: Mesh(dp_replicate=2, dp_shard=2): ``--num-distributed-optimizer-instances 2``, so DDP
reduce-scatters / all-gathers over the instance group of R = 2 ranks (``dp_shard``), and the
bucket ``[w0 | w1 | w2 | w3]`` is laid out for that group (``FlatBuffer(..., DP_SHARD, 2)``,
PR #6048 records the shard count and asserts it equals the group the collectives use): rank 0
owns w0 and w1, rank 1 owns w2 and w3; every element has exactly one owner, which steps it with
the fully reduced gradient.
Expected: EQUIVALENT, with a certificate.
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

bucket = FlatBuffer(spec.params, DPS, 2)        # sized for the instance group


def forward(p, d):
    local = sq_err_sum(p, d) / ops.dim_size(B)             # this rank's share of the mean
    return Loss(backward=local, report=all_reduce(all_reduce(local, DPR), DPS))


batch = {DPR: Shard(B), DPS: Shard(B)}
plan = Plan(mesh=Mesh(dp_replicate=2, dp_shard=2), placements={"x": batch, "t": batch},
            forward=forward,
            reduce_grads=lambda name, g: all_reduce(all_reduce(g, DPR), DPS),
            optimizer_owners={n: bucket.ownership(n) for n in NAMES})
