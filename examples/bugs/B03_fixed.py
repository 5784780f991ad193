"""B03 fixed: Hugging Face transformers PR #34191, gradient accumulation over K micro-batches.

Spec: L = sum_m S_m / N with N = sum_m N_m, the token mean over the whole accumulation window.
Fixed plan: N is counted from every micro-batch's mask before the loop (an all-reduce over the
micro-batch axis ``mb``) and micro-batch m backprops S_m / N, with no 1/K.
Smallest configuration (docs/bugs.md): K = 2, one sequence per micro-batch, no DP.
"""

from spec_lang import SGD, Axis, Dim, Mesh, Plan, Spec, all_reduce, index, mask, microbatches, ops

MB = Axis.MB
B, S, H, V = Dim("B", 2), Dim("S", 4), Dim("H", 4), Dim("V", 8)


def token_loss_sum(p, d):
    """S = sum over tokens of mask * cross-entropy, for a one-linear-layer model (B, S) -> V."""
    x = ops.embedding(d["tokens"], p["emb"], V)
    logits = ops.einsum(x, p["head"], out=(B, S, V))
    return ops.sum(d["mask"] * ops.cross_entropy_per_token(logits, d["labels"], V))


spec = Spec(params={"emb": (V, H), "head": (H, V)},
            data={"tokens": index(B, S, range=V), "labels": index(B, S, range=V),
                  "mask": mask(B, S)},
            forward=lambda p, d: token_loss_sum(p, d) / ops.sum(d["mask"]),
            optimizer=SGD())


def forward(p, d):
    n_window = all_reduce(ops.sum(d["mask"]), MB)       # N = sum_m N_m, before the loop
    return token_loss_sum(p, d) / n_window


plan = Plan(mesh=Mesh(dp=1), forward=forward, microbatches=microbatches(2, B))
