"""B65 fixed: torchtitan PR #2206, the global valid-token count before accumulation.

Spec: as B65_buggy.py, ``L = S / N`` over the whole global batch.
Plan: Mesh(dp=2), batch ``Shard(B)``, 2 micro-batches. The sum-reduction cross-entropy of each
micro-batch is scaled by ``1 / N_global`` (the valid-token count all-reduced over every
micro-batch and dp rank before the loop), and FSDP's division is disabled (gradients summed over
dp): every token weighs ``1/N``.
Expected: EQUIVALENT, with a certificate.
Smallest configuration (CASES2.md B65): dp = 2, uneven valid tokens (two micro-batches per rank).
"""

from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, index, mask, microbatches, ops,
)

DP, MB = Axis.DP, Axis.MB
B, S, H, V = Dim("B", 4), Dim("S", 4), Dim("H", 2), Dim("V", 4)


def masked_ce_sum(p, d):
    logits = ops.einsum(ops.embedding(d["tokens"], p["emb"], V), p["head"], out=(B, S, V))
    return ops.sum(d["mask"] * ops.cross_entropy_per_token(logits, d["labels"], V))


spec = Spec(params={"emb": (V, H), "head": (H, V)},
            data={"tokens": index(B, S, range=V), "labels": index(B, S, range=V),
                  "mask": mask(B, S)},
            forward=lambda p, d: masked_ce_sum(p, d) / ops.sum(d["mask"]), optimizer=SGD())


def forward(p, d):
    n = all_reduce(all_reduce(ops.sum(d["mask"]), MB), DP)   # global valid-token count
    seed = masked_ce_sum(p, d) / n                          # S_{r,m} / N_global
    return Loss(backward=seed, report=all_reduce(seed, DP))


batch = {DP: Shard(B)}
plan = Plan(mesh=Mesh(dp=2), placements={"tokens": batch, "labels": batch, "mask": batch},
            forward=forward, microbatches=microbatches(2, B),
            reduce_grads=lambda name, g: all_reduce(g, DP))         # summed (no 1/dp)
