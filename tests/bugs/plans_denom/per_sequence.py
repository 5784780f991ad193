"""Issue 10, family 3: a loss normalised by each sequence's token count and multiplied back.

DP2 over the batch. Each rank computes, per sequence, the mean of its tokens' cross-entropy
(``sum_S(mask * ce) / n_b`` with ``n_b = sum_S(mask)``) and multiplies it by ``n_b`` again before
summing: equal to the spec wherever every sequence has a token, NaN for a fully padded sequence,
which the spec allows (only N = sum(mask) over the batch is > 0). Expected: NOT EQUIVALENT, the
counterexample a fully padded sequence; never EQUIVALENT (``mul-canon`` used to cancel
``n_b^-1 * n_b``)."""

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
    n_seq = ops.sum(d["mask"], S)                                   # (B,): 0 if fully padded
    seq_mean = ops.sum(d["mask"] * token_ce(p, d), S) / n_seq       # per-sequence mean
    local = ops.sum(seq_mean * n_seq)                               # back to the token sum
    n = all_reduce(ops.sum(d["mask"]), DP)
    return Loss(backward=local / n, report=all_reduce(local, DP) / n)


plan = Plan(mesh=Mesh(dp=2), forward=forward,
            placements={k: {DP: Shard(B)} for k in ("tokens", "labels", "mask")},
            reduce_grads=lambda name, g: all_reduce(g, DP))
