"""B57 buggy: torchtitan #2318, DDP / HSDP gradients averaged twice after the global-token-count
change.

Spec: one linear layer, the masked token mean of the cross-entropy over the global batch,
``L = S / N``; SGD.
Plan: Mesh(dp=2) DDP, batch ``Shard(B)``. After torchtitan's global-token-count change (B65's fix)
each rank backprops ``S_r / N_global`` (N all-reduced over dp) and FSDP's divide factor is 1, but
the DDP / replicate path still averages over dp: ``AR_avg[dp](grad(S_r / N))``.
Expected: NOT EQUIVALENT: every gradient is 0.500 x the spec (1/dp; the reported DDP vs FSDP grad
norms differed by 8 at dp = 8).
Smallest configuration (CASES2.md B57): dp = 2 DDP: grads x 1/2.
"""

from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, index, mask, ops

DP = Axis.DP
B, S, H, V = Dim("B", 2), Dim("S", 2), Dim("H", 2), Dim("V", 4)


def masked_ce_sum(p, d):
    logits = ops.einsum(ops.embedding(d["tokens"], p["emb"], V), p["head"], out=(B, S, V))
    return ops.sum(d["mask"] * ops.cross_entropy_per_token(logits, d["labels"], V))


spec = Spec(params={"emb": (V, H), "head": (H, V)},
            data={"tokens": index(B, S, range=V), "labels": index(B, S, range=V),
                  "mask": mask(B, S)},
            forward=lambda p, d: masked_ce_sum(p, d) / ops.sum(d["mask"]), optimizer=SGD())


def forward(p, d):
    n = all_reduce(ops.sum(d["mask"]), DP)                 # global token count
    local = masked_ce_sum(p, d) / n                        # S_r / N_global
    return Loss(backward=local, report=all_reduce(local, DP))


batch = {DP: Shard(B)}
plan = Plan(mesh=Mesh(dp=2), placements={"tokens": batch, "labels": batch, "mask": batch},
            forward=forward,
            reduce_grads=lambda name, g: all_reduce(g, DP, "avg"))   # BUG: averaged again
