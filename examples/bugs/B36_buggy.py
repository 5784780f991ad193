"""B36 buggy: NeMo PR #8792, DP distributed optimizer, embedding-gradient reduction in bf16.

Source: https://github.com/NVIDIA/NeMo/pull/8792 (the embedding-gradient reduction ran in the
gradient communication dtype, bf16, instead of the fp32 main-grad dtype). Floating-point only:
over the reals the plan equals the spec, so the proof says EQUIVALENT (correctly);
``prove --precision-lint`` flags it.
Spec: token-mean cross-entropy of a one-layer model (embedding, head) over the global batch;
the embedding gradient is reduced over DP in fp32.
Plan (Mesh(dp=2), distributed optimizer = ZeRO-1): the batch is split over dp; each rank's
gradients are reduce-scattered over dp along V (the rank owns a V block of each optimizer
state), the update runs on the block, and the parameters are all-gathered. The bug: the
embedding gradient is reduce-scattered in bf16 (``dtype="bf16"``): rank gradients 1 + 2^-8 and
2^-8 sum to 1 in bf16 but to 1 + 2^-7 in fp32 (tests/bugs/test_precision.py).
Expected: proof EQUIVALENT; lint FLAG at the reduce_scatter line of ``tok_embeddings``.
Smallest configuration (CASES.md B36): dp = 2, one embedding.
"""

from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_gather, all_reduce, index, mask, ops,
    reduce_scatter,
)

DP = Axis.DP
B, S, H, V = Dim("B", 2), Dim("S", 2), Dim("H", 4), Dim("V", 8)


def token_loss_sum(p, d):
    """sum over tokens of mask * cross-entropy for embedding (V, H) -> head (H, V)."""
    x = ops.embedding(d["tokens"], p["tok_embeddings"], V)
    logits = ops.einsum(x, p["output"], out=(B, S, V))
    return ops.sum(d["mask"] * ops.cross_entropy_per_token(logits, d["labels"], V))


spec = Spec(params={"tok_embeddings": (V, H), "output": (H, V)},
            data={"tokens": index(B, S, range=V), "labels": index(B, S, range=V),
                  "mask": mask(B, S)},
            forward=lambda p, d: token_loss_sum(p, d) / ops.sum(d["mask"]),
            optimizer=SGD())


def forward(p, d):
    n_tokens = all_reduce(ops.sum(d["mask"]), DP)     # global token count (fp32)
    local = token_loss_sum(p, d) / n_tokens
    return Loss(backward=local, report=all_reduce(local, DP))


plan = Plan(
    mesh=Mesh(dp=2), forward=forward,
    placements={"tokens": {DP: Shard(B)}, "labels": {DP: Shard(B)}, "mask": {DP: Shard(B)}},
    optimizer_placements={"tok_embeddings": {DP: Shard(V)}, "output": {DP: Shard(V)}},
    reduce_grads={
        "tok_embeddings": lambda n, g: reduce_scatter(g, DP, V, dtype="bf16"),  # the bug
        "output": lambda n, g: reduce_scatter(g, DP, V),
    },
    gather_params=lambda n, p: all_gather(p, DP, V),
)
