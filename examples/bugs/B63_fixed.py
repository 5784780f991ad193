"""B63 fixed: Megatron-LM PR #6500, Megatron-FSDP v2 + PP: the tied embedding's gradient is
reconstructed in full before the PP all-reduce.

Spec: as B63_buggy.py, g_E = (1/dp) sum_d (a_d + b_d).
Plan: Mesh(pp=2, dp=2), 1F1B, one micro-batch; the stages' buffers are laid out as in the buggy
file (E at different offsets). The fix (PR #6500's ``uneven_dtensor_to_full_tensor``): each stage
first reconstructs the full logical gradient of E (the dp average of its whole tensor, the same
index map on both stages), the PP all-reduce then adds equal logical indices, and every stage's
owner takes its slice of the full result (here: the distributed optimizer steps each rank's row
block, Shard over dp, and all-gathers the parameter).
Expected: EQUIVALENT, with a certificate.
Smallest configuration (CASES2.md B63, derived): pp=2, dp=2, tied embeddings.
"""

from fractions import Fraction

from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_gather, all_reduce, index, mask,
    microbatches, ops,
)
from spec_lang.pipeline import Pipeline, stage
from spec_lang.plans.sharded_dp import owned_block
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
rows = {"E": V, "W_1": H, "W_2": K}


def reduce_grads(name, g):
    full = all_reduce(g, DP, "avg")             # the full logical gradient on each stage
    if name == "E":
        full = all_reduce(full, PP)             # equal logical indices on both stages
    return owned_block(full, DP, rows[name])    # this rank's row block (Shard over dp)


plan = Plan(mesh=Mesh(pp=2, dp=2),
            placements={k: {DP: Shard(B)} for k in ("tokens", "labels", "mask")},
            forward=pipe.forward, schedule=pipe, microbatches=microbatches(1, B),
            reduce_grads=reduce_grads,
            optimizer_placements={name: {DP: Shard(d)} for name, d in rows.items()},
            gather_params=lambda name, new: all_gather(new, DP, rows[name]))
