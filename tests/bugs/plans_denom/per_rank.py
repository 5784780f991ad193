"""Issue 10, family 3, per-rank variant: each DP rank divides its token-loss sum by its own token
count and multiplies it back. NaN when a rank's share of the batch is fully padded (the spec
allows it). Expected: NOT EQUIVALENT (an empty rank share), never EQUIVALENT."""

from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, index, mask, ops

DP = Axis.DP
B, S, H, V = Dim("B", 4), Dim("S", 4), Dim("H", 4), Dim("V", 8)


def token_ce(p, d):
    """Cross-entropy per token of the labels: (B, S)."""
    logits = ops.einsum(ops.embedding(d["tokens"], p["emb"], V), p["head"], out=(B, S, V))
    return ops.cross_entropy_per_token(logits, d["labels"], V)


# the spec: masked token mean over the whole batch, N = sum(mask) > 0 (the mask domain)
spec = Spec(params={"emb": (V, H), "head": (H, V)},
            data={"tokens": index(B, S, range=V), "labels": index(B, S, range=V),
                  "mask": mask(B, S)},
            forward=lambda p, d: ops.sum(d["mask"] * token_ce(p, d)) / ops.sum(d["mask"]),
            optimizer=SGD())


def forward(p, d):
    n_rank = ops.sum(d["mask"])                                     # this rank's tokens
    local = ops.sum(d["mask"] * token_ce(p, d)) / n_rank * n_rank
    n = all_reduce(n_rank, DP)
    return Loss(backward=local / n, report=all_reduce(local, DP) / n)


plan = Plan(mesh=Mesh(dp=2), forward=forward,
            placements={k: {DP: Shard(B)} for k in ("tokens", "labels", "mask")},
            reduce_grads=lambda name, g: all_reduce(g, DP))
