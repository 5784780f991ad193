"""B09 buggy: verl issue #5625, gradient accumulation over dynamic micro-batches (+ FSDP dp).

Spec: the token mean over the mini-batch, L = sum_m S_m / sum_m N_m, where a token counts when
its sample is present and its mask is 1.
Dynamic batching packs a data-dependent number of samples b_m into micro-batch m (B = sum_m b_m).
Modelled honestly: each micro-batch has a fixed number of sample slots (dim B split over ``mb``)
and a per-sample presence mask ``present`` (B,) says which slots hold a sample, so b_m =
sum(present) over the micro-batch's slots and N_m = sum(present * mask) are free (random)
quantities, not constants.
Plan: micro-batch m's loss is its token mean scaled by its sample share,
L_plan = sum_m (b_m / B) S_m / N_m; a token in micro-batch m weighs b_m / (B N_m), not 1 / N.
FSDP averages over dp (dp = 1 here).
Expected: NOT EQUIVALENT on the loss and every gradient: the values differ (not a constant
factor; equal for all inputs only if N_m / b_m is the same in every micro-batch).
Smallest configuration (CASES.md B09): one device, two micro-batches (here 2 sample slots each).
"""

from spec_lang import (
    SGD, Axis, Dim, Mesh, Plan, Shard, Spec, all_reduce, index, mask, microbatches, ops,
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
    b_m = ops.sum(d["present"])                        # samples in this micro-batch
    b_total = all_reduce(b_m, MB)                      # B = sum_m b_m (this rank's mini-batch)
    token_mean = token_loss_sum(p, d, w) / ops.sum(w)  # S_m / N_m
    return (b_m / b_total) * token_mean                # BUG: sample share x token mean


data_placement = {DP: Shard(B)}
plan = Plan(mesh=Mesh(dp=1),
            placements={k: data_placement for k in ("tokens", "labels", "mask", "present")},
            forward=forward,
            reduce_grads=lambda name, g: all_reduce(g, DP, "avg"),     # FSDP: AR_avg[dp]
            microbatches=microbatches(2, B))
