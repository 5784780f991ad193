"""B09 fixed: verl issue #5625, gradient accumulation over dynamic micro-batches (+ FSDP dp).

Spec: the token mean over the mini-batch, L = sum_m S_m / sum_m N_m, where a token counts when
its sample is present and its mask is 1.
Dynamic batching packs a data-dependent number of samples b_m into micro-batch m (B = sum_m b_m).
Modelled honestly: each micro-batch has a fixed number of sample slots (dim B split over ``mb``)
and a per-sample presence mask ``present`` (B,) says which slots hold a sample, so b_m =
sum(present) over the micro-batch's slots and N_m = sum(present * mask) are free (random)
quantities, not constants.
Plan: N = AR_sum[dp](sum_m N_m) is counted before the loop; micro-batch m backprops
dp * S_m / N; FSDP's AR_avg[dp] cancels the dp, so every token weighs 1 / N.
Expected: EQUIVALENT, with a certificate.
Smallest configuration (CASES.md B09): one device, two micro-batches (here 2 sample slots each).
"""

from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, index, mask, microbatches, ops,
)

DP, MB = Axis.DP, Axis.MB
B, S, H, V = Dim("B", 4), Dim("S", 4), Dim("H", 4), Dim("V", 8)


def token_loss_sum(p, d, w):
    """S = sum over tokens of w * cross-entropy; one linear layer (B, S) -> (B, S, V)."""
    x = ops.embedding(d["tokens"], p["emb"], V)
    logits = ops.einsum(x, p["head"], out=(B, S, V))
    return ops.sum(w * ops.cross_entropy_per_token(logits, d["labels"], V))


def token_weights(d):
    """1 for a valid token of a present sample, else 0: (B, S)."""
    return d["present"] * d["mask"]


def spec_loss(p, d):
    w = token_weights(d)
    return token_loss_sum(p, d, w) / ops.sum(w)


spec = Spec(params={"emb": (V, H), "head": (H, V)},
            data={"tokens": index(B, S, range=V), "labels": index(B, S, range=V),
                  "mask": mask(B, S), "present": mask(B)},
            forward=spec_loss, optimizer=SGD())


def forward(p, d):
    w = token_weights(d)
    n = all_reduce(all_reduce(ops.sum(w), MB), DP)     # N = AR_sum[dp](sum_m N_m), before the loop
    seed = ops.axis_size(DP) * token_loss_sum(p, d, w) / n
    return Loss(backward=seed, report=all_reduce(seed, DP, "avg"))


data_placement = {DP: Shard(B)}
plan = Plan(mesh=Mesh(dp=1),
            placements={k: data_placement for k in ("tokens", "labels", "mask", "present")},
            forward=forward,
            reduce_grads=lambda name, g: all_reduce(g, DP, "avg"),     # FSDP: AR_avg[dp]
            microbatches=microbatches(2, B))
