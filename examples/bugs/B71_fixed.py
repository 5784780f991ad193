"""B71 fixed: PyTorch #172812 / PR #172927, ``local_map`` with uneven sharding: the true global
shape.

Spec: a weight ``w`` and an input ``x`` over a dim of length 5, stored padded to X = 6 (the
``torch.chunk`` layout over 2 ranks: sizes [3, 2]; ``valid`` = 1 on the first ``|X| - 1``
positions, 0 on the padding), and the mean ``L = sum(valid w x) / sum(valid)`` over the 5 real
elements; SGD.
Plan: Mesh(tp=2), ``w`` and ``x`` ``Shard(X)`` (rank 0 holds 3 real elements, rank 1 holds 2
and the padding). The fix passes the true global shapes (``out_shapes``), here the
all-gathered local sizes: every rank divides by the same global length ``sum_r |iota_r|``.
Expected: EQUIVALENT, with a certificate.
Smallest configuration (CASES2.md B71): 2 ranks, a length-5 dim, one ``local_map`` call.
"""

from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real, scatter_to_tp_region,
)
from spec_lang.positions import position_index

TP = Axis.TP
X, XK = Dim("X", 6), Dim("XK", 6)


def valid():
    """1 on the first ``|X| - 1`` positions (the real elements), 0 on the padding element."""
    left = ops.dim_size(X) - 1 - position_index(X, XK)        # |X| - 1 - pos
    return ops.maximum(0, -ops.maximum(-left, -1))            # clamp to [0, 1]


spec = Spec(params={"w": (X,)}, data={"x": real(X)},
            forward=lambda p, d: ops.sum(valid() * p["w"] * d["x"]) / ops.sum(valid()),
            optimizer=SGD())


def global_length(valid_local):
    """``DTensor.from_local(out, Shard(0), shape=...)`` with the gathered local sizes."""
    return all_reduce(ops.sum(valid_local), TP)              # the same on every rank


def forward(p, d):
    v = scatter_to_tp_region(valid(), X, TP)                  # this rank's chunk of the layout
    local = ops.sum(v * p["w"] * d["x"]) / global_length(v)
    return Loss(backward=local, report=all_reduce(local, TP))


shard = {TP: Shard(X)}
plan = Plan(mesh=Mesh(tp=2), placements={"w": shard, "x": shard}, forward=forward)
