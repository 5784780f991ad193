"""B15 buggy: Megatron-LM #656 / #844, PP x DP distributed optimizer with a tied embedding.

Source: NVIDIA/Megatron-LM issues 656 and 844. With ``--use-distributed-optimizer`` each pipeline
stage packs its gradients into one flat buffer and reduce-scatters it over dp (rank r owns the
index range [r L/dp, (r+1) L/dp)); the tied input/output embedding E is then all-reduced over
{first stage, last stage} (``_allreduce_embedding_grads``). E sits at *different offsets* in the
two stages' buffers, so its dp owner differs between the stages, and the stage all-reduce pairs
equal dp ranks: an owner adds its partner's stale, unreduced slice.
Spec: E (V, H) used by the input lookup (stage 0) and the output projection (stage 1), W_1 (H, K)
on stage 0, W_2 (K, H) on stage 1; masked token-mean cross-entropy; SGD.
    g_E = (1/dp) sum_d (a_d + b_d), a_d / b_d the two uses' gradients on dp rank d.
Plan: Mesh(pp=2, dp=2), 1F1B with one micro-batch (spec_lang.pipeline, E tied across the
stages). Buffers (spec_lang.plans.sharded_dp.FlatBuffer, all blocks 16 elements): stage 0
[W_1 | E] -> dp rank 0 owns W_1, rank 1 owns E; stage 1 [E | W_2] -> rank 0 owns E, rank 1 W_2.
After the in-place reduce-scatter (average) each rank's E slice is reduced where it owns it and
stale elsewhere; the embedding all-reduce over pp adds the two stages' slices of equal dp ranks;
E's owner on each stage steps with what it then holds, and the parameter all-gather hands that to
every rank.
Expected: NOT EQUIVALENT at ``grad:E``: stage 0's owner (dp 1) steps with (a_0+a_1)/2 + b_1,
stage 1's owner (dp 0) with a_0 + (b_0+b_1)/2; spec (a_0+a_1+b_0+b_1)/2 (values differ). W_1 and
W_2 are right.
Smallest configuration (CASES.md B15): pp=2, dp=2, buffers [W_1 | E] and [E | W_2].
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
buffers = [FlatBuffer({"W_1": (H, K), "E": (V, H)}, DP, 2),     # stage 0: [W_1 | E]
           FlatBuffer({"E": (V, H), "W_2": (K, H)}, DP, 2)]     # stage 1: [E | W_2]


def reduce_grads(name, g):
    holding = [s for s, buf in enumerate(buffers) if name in buf.entries]
    # each stage: its buffer's slice of `name` after the in-place reduce-scatter (avg) over dp
    view = pipe.per_stage({s: buffers[s].after_reduce_scatter(name, g) for s in holding})
    if name == "E":
        view = all_reduce(view, PP)                          # embedding group: pairs equal dp ranks
    # the owner of each block steps with what it holds; the param all-gather distributes it
    return pipe.per_stage({s: buffers[s].owner_value(name, view) for s in holding})


plan = Plan(mesh=Mesh(pp=2, dp=2),
            placements={k: {DP: Shard(B)} for k in ("tokens", "labels", "mask")},
            forward=pipe.forward, schedule=pipe, microbatches=microbatches(1, B),
            reduce_grads=reduce_grads)
