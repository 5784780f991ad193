"""B35 fixed: Megatron-LM #1256, TP + sequence parallelism, hidden dropout in the SP region.

Source: https://github.com/NVIDIA/Megatron-LM/issues/1256 (two RNG context managers combined with
``and`` instead of a comma, so the per-TP-rank fork of the model-parallel RNG tracker was skipped).
Spec: one MLP block with a residual, ``z = x + dropout(mlp(x), p)``, loss ``sum(z * target)``;
the dropout mask has one fresh Bernoulli(1 - p) draw per global position (s, h).
Plan (Mesh(tp=2), SP on): the residual stream is sharded along S over tp; gather (SP) -> w1 (column
parallel) -> w2 (row parallel) -> reduce-scatter (SP) -> dropout on the rank's rows -> gather for
the replicated loss. The fix: dropout runs in the model-parallel RNG tracker's stream, forked on
the TP rank: rank t draws stream (seed + 2718, t), so position -> (stream, offset) is injective.
Expected: EQUIVALENT (in distribution: the plan's draws are renamed to the spec's mask symbols,
a renaming the injectivity check justifies), certificate accepted.
Smallest configuration (CASES.md B35): tp = 2, SP on, one layer, hidden dropout p > 0, S = 2.
"""

from fractions import Fraction

from spec_lang import (
    SGD, Axis, Dim, Mesh, Plan, Shard, Spec, gather_from_sp_region, gather_from_tp_region, ops,
    real, reduce_scatter_to_sp_region,
)
from spec_lang.rng import model_parallel_rng

TP = Axis.TP
B, S, H, F = Dim("B", 1), Dim("S", 2), Dim("H", 2), Dim("F", 4)
P_DROP = Fraction(1, 10)
tp_stream = model_parallel_rng(1234)  # get_cuda_rng_tracker().fork(): stream (seed, tp_rank)


def block(p, x, enter, leave, rng):
    """x (B, S, H) -> x + dropout(w2 silu(w1 x)); enter/leave are the TP region mappings."""
    h = ops.silu(ops.einsum(enter(x), p["w1"], out=(B, S, F)))
    y = leave(ops.einsum(h, p["w2"], out=(B, S, H)))
    return x + ops.dropout(y, P_DROP, rng, name="hidden")


spec = Spec(params={"w1": (H, F), "w2": (F, H)},
            data={"x": real(B, S, H), "target": real(B, S, H)},
            forward=lambda p, d: ops.sum(block(p, d["x"], lambda t: t, lambda t: t, None)
                                         * d["target"]),
            optimizer=SGD())


def forward(p, d):
    z = block(p, d["x"], lambda t: gather_from_sp_region(t, S, TP),
              lambda t: reduce_scatter_to_sp_region(t, S, TP), tp_stream)
    return ops.sum(gather_from_tp_region(z, S, TP) * d["target"])


plan = Plan(mesh=Mesh(tp=2), forward=forward,
            placements={"w1": {TP: Shard(F)}, "w2": {TP: Shard(F)}, "x": {TP: Shard(S)}})
