"""B65 buggy: torchtitan PR #2206 (#1842), per-rank, per-micro-batch loss normalisation with
uneven valid tokens.

Spec: one linear layer, the masked token mean of the cross-entropy over the whole global batch
(every rank, every micro-batch), ``L = S / N``; SGD.
Plan: Mesh(dp=2), batch ``Shard(B)``, 2 micro-batches of gradient accumulation. Each rank
backprops its own token mean per micro-batch, ``S_{r,m} / N_{r,m}``, scaled by ``1/M`` for the
accumulation, and FSDP averages over dp: ``g = (1/(R M)) sum_{r,m} grad(S_{r,m}) / N_{r,m}``.
A token in a short micro-batch is over-weighted; with equal counts the two coincide.
Expected: NOT EQUIVALENT (values differ on random uneven masks; the loss and every gradient).
Smallest configuration (CASES2.md B65): dp = 2, one sequence per rank with 1 and 3 valid
tokens (here two micro-batches per rank as well).
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
    local_mean = masked_ce_sum(p, d) / ops.sum(d["mask"])     # BUG: S_{r,m} / N_{r,m}
    seed = local_mean / ops.axis_size(MB)                     # 1/M for the accumulation
    report = all_reduce(seed, DP) / ops.axis_size(DP)
    return Loss(backward=seed, report=report)


batch = {DP: Shard(B)}
plan = Plan(mesh=Mesh(dp=2), placements={"tokens": batch, "labels": batch, "mask": batch},
            forward=forward, microbatches=microbatches(2, B),
            reduce_grads=lambda name, g: all_reduce(g, DP, "avg"))     # FSDP's average
