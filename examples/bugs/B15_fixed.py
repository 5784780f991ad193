"""B15 fixed: Megatron-LM #656 / #844, PP x DP distributed optimizer with a tied embedding.

Source: NVIDIA/Megatron-LM issues 656 and 844 (see B15_buggy.py for the bug).
Spec: as B15_buggy.py: g_E = (1/dp) sum_d (a_d + b_d).
Fixed plan: E has the same index map on both stages: it gets its own bucket ([E] on both
stages; W_1 and W_2 their own: [W_1], [W_2]). Each bucket's reduce-scatter gives dp rank r rows
block r of its parameter (a Shard over dp), so the embedding all-reduce over pp pairs two owners
of the same rows: each owner adds two reduced slices. The distributed optimizer steps each rank's
shard (optimizer_placements Shard over dp) and all-gathers the parameter.
Expected: EQUIVALENT, every goal proved by rewriting (certificate checked).
Smallest configuration (CASES.md B15): pp=2, dp=2.
"""

from fractions import Fraction

from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_gather, all_reduce, index, mask,
    microbatches, ops,
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
# one bucket per parameter: the same index map for E on both stages
buckets = {name: FlatBuffer({name: dims}, DP, 2) for name, dims in spec.params.items()}
rows = {name: dims[0] for name, dims in spec.params.items()}      # the dim a bucket splits


def reduce_grads(name, g):
    owned = buckets[name].owned(name, g)                 # reduce-scatter (avg): rows block r
    if name == "E":
        owned = all_reduce(owned, PP)                    # embedding group: owners of equal rows
    return owned


plan = Plan(mesh=Mesh(pp=2, dp=2),
            placements={k: {DP: Shard(B)} for k in ("tokens", "labels", "mask")},
            forward=pipe.forward, schedule=pipe, microbatches=microbatches(1, B),
            reduce_grads=reduce_grads,
            optimizer_placements={name: {DP: Shard(d)} for name, d in rows.items()},
            gather_params=lambda name, new: all_gather(new, DP, rows[name]))
