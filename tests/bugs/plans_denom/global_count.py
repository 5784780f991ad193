"""Issue 10, family 3, the correct counterpart: the plan divides its token-loss sum by the
*global* token count and multiplies it back. The count is all-reduced over the whole batch, so
its normal form is the spec's ``sum(mask)``, which the mask domain makes > 0: the cancellation
is justified. Expected: EQUIVALENT (the per-sequence / per-rank / per-micro-batch versions are
NOT EQUIVALENT)."""

from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, index, mask, ops

DP = Axis.DP
B, S, H, V = Dim("B", 4), Dim("S", 4), Dim("H", 4), Dim("V", 8)


def token_ce(p, d):
    """Cross-entropy per token of the labels: (B, S)."""
    logits = ops.einsum(ops.embedding(d["tokens"], p["emb"], V), p["head"], out=(B, S, V))
    return ops.cross_entropy_per_token(logits, d["labels"], V)


# the spec: the masked token-loss *sum*
spec = Spec(params={"emb": (V, H), "head": (H, V)},
            data={"tokens": index(B, S, range=V), "labels": index(B, S, range=V),
                  "mask": mask(B, S)},
            forward=lambda p, d: ops.sum(d["mask"] * token_ce(p, d)), optimizer=SGD())


def forward(p, d):
    n = all_reduce(ops.sum(d["mask"]), DP)                          # N over the whole batch
    local = ops.sum(d["mask"] * token_ce(p, d)) / n * n
    return Loss(backward=local, report=all_reduce(local, DP))


plan = Plan(mesh=Mesh(dp=2), forward=forward,
            placements={k: {DP: Shard(B)} for k in ("tokens", "labels", "mask")},
            reduce_grads=lambda name, g: all_reduce(g, DP))
