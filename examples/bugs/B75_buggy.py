"""B75 buggy (floating point only): PyTorch #190626 / PR #190627, FSDP2 + TP: the TP
Partial -> Replicate gradient all-reduce runs in bf16 despite ``reduce_dtype=fp32``.

Spec: a norm weight ``g`` (H,) scaling a sequence of activations ``x`` (B, S, H), a linear
objective against ``t``, mean over tokens; SGD.
Plan: Mesh(dp=2, tp=2): the batch ``Shard(B)`` over dp, the sequence ``Shard(S)`` over tp
(sequence parallelism); ``g`` is TP-replicated, so each tp rank's gradient is its tokens' share
(Partial over tp) and TP all-reduces it; FSDP2 then reduce-scatters over dp into the optimizer's
``Shard(H)`` (``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)``) and all-gathers the
parameter. ``reduce_dtype`` reached only FSDP's reduce-scatter buffer: the TP all-reduce of the
Partial gradient ran in bf16 (``all_reduce(..., dtype="bf16")``).
Expected: EQUIVALENT over the reals (a cast is the identity), and ``prove --precision-lint``
flags the bf16 TP all-reduce.
Smallest configuration (CASES2.md B75): FSDP2 + TP (dp = 2, tp = 2), a TP-replicated norm weight
under SP.
"""

from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_gather, all_reduce, ops, real,
    reduce_scatter,
)

DP, TP = Axis.DP, Axis.TP
B, S, H = Dim("B", 2), Dim("S", 2), Dim("H", 2)
TP_REDUCE_DTYPE = "bf16"               # BUG: reduce_dtype applied only to FSDP's reduce-scatter


def objective_sum(p, d):
    return ops.sum(d["x"] * p["g"] * d["t"])


spec = Spec(params={"g": (H,)}, data={"x": real(B, S, H), "t": real(B, S, H)},
            forward=lambda p, d: objective_sum(p, d) / (ops.dim_size(B) * ops.dim_size(S)),
            optimizer=SGD())


def forward(p, d):
    local = objective_sum(p, d) / (ops.dim_size(B) * ops.dim_size(S))   # this rank's tokens
    return Loss(backward=local, report=all_reduce(all_reduce(local, TP), DP))


def reduce_grads(name, grad):
    grad = all_reduce(grad, TP, dtype=TP_REDUCE_DTYPE)      # TP: Partial -> Replicate
    return reduce_scatter(grad, DP, H, dtype="fp32")         # FSDP2 in reduce_dtype


tokens = {DP: Shard(B), TP: Shard(S)}
plan = Plan(mesh=Mesh(dp=2, tp=2), placements={"x": tokens, "t": tokens}, forward=forward,
            reduce_grads=reduce_grads, optimizer_placements={"g": {DP: Shard(H)}},
            gather_params=lambda name, new: all_gather(new, DP, H))
