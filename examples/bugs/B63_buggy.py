"""B63 buggy: Megatron-LM PR #6500, Megatron-FSDP v2 + PP: the tied embedding's PP all-reduce adds
mismatched flat offsets.

Spec: E (V, H) used by the input lookup (stage 0) and the output projection (stage 1), W_1 (H, K)
on stage 0, W_2 (K, H) on stage 1; masked token-mean cross-entropy; SGD.
    g_E = (1/dp) sum_d (a_d + b_d), a_d / b_d the two uses' gradients on dp rank d.
Plan: Mesh(pp=2, dp=2), 1F1B, one micro-batch. Megatron-FSDP v2 flattens each stage's
parameters into its own buffer and shards it over dp (``FlatBuffer``): stage 0 ``[E | W_1 |
pad]`` (48 elements: rank 0 owns E's 16 elements plus half of W_1), stage 1 ``[W_2 | E]`` (32:
rank 0 owns W_2, rank 1 owns E). The "same shard" of the two stages therefore holds different
slices of E at different offsets, and all-reducing the raw local shards over pp adds
``g_first[a_0 + i] + g_last[a_1 + i]`` with ``a_0 != a_1``: each stage's owner of E steps with its
own reduced slice plus the other stage's stale, unreduced one.
Expected: NOT EQUIVALENT at ``grad:E`` (values differ); W_1 and W_2 are right.
Smallest configuration (CASES2.md B63, derived): pp=2, dp=2, tied embeddings, E at different
offsets on the two stages.
"""

from fractions import Fraction

from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, index, mask, microbatches, ops,
)
from spec_lang.pipeline import Pipeline, stage
from spec_lang.plans.sharded_dp import FlatBuffer
from spec_lang.schedules import one_f_one_b

PP, DP, MB = Axis.PP, Axis.DP, Axis.MB
B, S, V, H, K = Dim("B", 4), Dim("S", 4), Dim("V", 4), Dim("H", 4), Dim("K", 4)


def first_stage(p, tokens):
    """Input lookup with E, then W_1: (B, S) -> (B, S, K)."""
    return ops.einsum(ops.embedding(tokens, p["E"], V), p["W_1"], out=(B, S, K))


def masked_ce_sum(p, h, d):
    """W_2, then the output projection with the tied E, masked cross-entropy summed."""
    y = ops.einsum(h, p["W_2"], out=(B, S, H))
    logits = ops.einsum(y, p["E"], out=(B, S, V))
    return ops.sum(d["mask"] * ops.cross_entropy_per_token(logits, d["labels"], V))


spec = Spec(params={"E": (V, H), "W_1": (H, K), "W_2": (K, H)},
            data={"tokens": index(B, S, range=V), "labels": index(B, S, range=V),
                  "mask": mask(B, S)},
            forward=lambda p, d: masked_ce_sum(p, first_stage(p, d["tokens"]), d)
            / ops.sum(d["mask"]),
            optimizer=SGD(lr=Fraction(1, 10)))


def first(p, d, io):
    io.send(first_stage(p, d["tokens"]))


def last(p, d, io):
    n = all_reduce(all_reduce(ops.sum(d["mask"]), MB), DP)  # global token count
    seed = ops.axis_size(DP) * masked_ce_sum(p, io.recv(), d) / n  # dp x: undone by the average
    return Loss(backward=seed, report=all_reduce(seed, DP) / ops.axis_size(DP))


pipe = Pipeline([stage(first, ["E", "W_1"]), stage(last, ["W_2", "E"])],
                schedule=one_f_one_b(pp=2, microbatches=1))
buffers = [FlatBuffer({"E": (V, H), "W_1": (H, K)}, DP, 2, pad=48),   # stage 0: [E | W_1 | pad]
           FlatBuffer({"W_2": (K, H), "E": (V, H)}, DP, 2)]           # stage 1: [W_2 | E]


def reduce_grads(name, g):
    holding = [s for s, buf in enumerate(buffers) if name in buf.entries]
    # each stage: its buffer's slice of `name` after the in-place reduce-scatter (avg) over dp
    view = pipe.per_stage({s: buffers[s].after_reduce_scatter(name, g) for s in holding})
    if name == "E":
        view = all_reduce(view, PP)          # BUG: raw local shards with different index maps
    # the owner of each block steps with what it holds; the param all-gather distributes it
    return pipe.per_stage({s: buffers[s].owner_value(name, view) for s in holding})


plan = Plan(mesh=Mesh(pp=2, dp=2),
            placements={k: {DP: Shard(B)} for k in ("tokens", "labels", "mask")},
            forward=pipe.forward, schedule=pipe, microbatches=microbatches(1, B),
            reduce_grads=reduce_grads)
