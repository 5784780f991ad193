"""B57 fixed: torchtitan #2318 / PR #2458, DDP / HSDP gradients summed after the global-token-count
change (composable ``replicate`` without its automatic division).

Spec: one linear layer, the masked token mean of the cross-entropy over the global batch,
``L = S / N``; SGD.
Plan: Mesh(dp=2) DDP, batch ``Shard(B)``. After torchtitan's global-token-count change (B65's fix)
each rank backprops ``S_r / N_global`` (N all-reduced over dp); PR #2458 replaced the DDP path by
composable ``replicate`` with its automatic division disabled, so the gradients are summed:
``AR_sum[dp](grad(S_r / N))``.
Expected: EQUIVALENT, with a certificate.
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
            reduce_grads=lambda name, g: all_reduce(g, DP, "sum"))
