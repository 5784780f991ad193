"""B17 buggy: PyTorch #154888 (also verl #7493), FSDP1 hybrid sharding on a (replicate 2, shard 1) mesh.

Source: pytorch/pytorch#154888. ``FullyShardedDataParallel(..., sharding_strategy=HYBRID_SHARD)``
on a 2-D mesh whose shard dim has size 1 falls back to no sharding but keeps reducing gradients
over the 1-rank shard group (the identity) and never issues the all-reduce over the replicate
group.
Spec: one linear layer, mean squared error over the global batch of B rows:
    L = sum_{b,o} (x W - y)^2 / |B|,  g = (1/n) sum_r g_r  (g_r: rank r's local-mean gradient).
Plan: Mesh(dp_replicate=2, dp_shard=1); the batch is split over both axes; each rank backprops
the mean over its rows; ``reduce_grads`` averages over ``dp_shard`` only.
Expected: NOT EQUIVALENT at ``grad:w``: rank r steps with g_r, not the mean (values differ, no
constant factor); the parameters differ across replicas after one step.
Smallest configuration (CASES.md B17): 2 ranks, mesh (2, 1), different data on each rank.
"""

from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real

DPR, DPS = Axis.DP_REPLICATE, Axis.DP_SHARD
B, H, O = Dim("B", 4), Dim("H", 3), Dim("O", 2)


def squared_error(p, d):
    """sum over rows and outputs of (x W - y)^2 / |B|: the batch mean (a rank's addend of it)."""
    err = ops.einsum(d["x"], p["w"], out=(B, O)) - d["y"]
    return ops.mean(ops.sum(err * err, O), B)


spec = Spec(params={"w": (H, O)}, data={"x": real(B, H), "y": real(B, O)},
            forward=squared_error, optimizer=SGD(lr=0.1))


def forward(p, d):
    local_mean = ops.axis_size(DPR) * ops.axis_size(DPS) * squared_error(p, d)  # mean of my rows
    return Loss(backward=local_mean,
                report=all_reduce(all_reduce(local_mean, DPS, "avg"), DPR, "avg"))


data_split = {DPR: Shard(B), DPS: Shard(B)}
plan = Plan(
    mesh=Mesh(dp_replicate=2, dp_shard=1),
    placements={"x": data_split, "y": data_split},
    forward=forward,
    # HYBRID_SHARD with a 1-rank shard group: reduce (avg) over dp_shard, i.e. the identity;
    # the all-reduce over dp_replicate is never issued
    reduce_grads=lambda name, g: all_reduce(g, DPS, "avg"),
)
