"""B01 buggy: Megatron-LM issue #673, context parallelism x data parallelism, per-token loss.

Spec: L = S / N, the masked token mean over the whole global batch (S = sum of mask * ce over
every token, N = sum of the mask); g = grad S / N.
Plan: the batch is Shard(B) over dp and the sequence Shard(S) over cp (rank (d, c) holds one
chunk of every sequence). Each rank backprops ``cp * S_{d,c} / N`` with N = all_reduce over
dp x cp of the local token counts: the ``x cp`` belongs to Megatron's per-sequence-mean path and
stayed in the per-token path. Gradients are summed (not averaged) over dp x cp. The reported
loss comes from the reduced (S, N) pair, so it is right.
Expected: NOT EQUIVALENT, every weight gradient is cp x the spec: ratio 2.000 on grad:head
(dp = 1, cp = 2; the loss goal matches).
Smallest configuration (CASES.md B01): dp = 1, cp = 2, one linear layer + masked cross-entropy,
4 tokens (2 * cp chunks).
"""

from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, index, mask, ops,
)

DP, CP = Axis.DP, Axis.CP
B, S, H, V = Dim("B", 1), Dim("S", 4), Dim("H", 4), Dim("V", 8)


def token_loss_sum(p, d):
    """S = sum over tokens of mask * cross-entropy; one linear layer (B, S) -> (B, S, V)."""
    x = ops.embedding(d["tokens"], p["emb"], V)
    logits = ops.einsum(x, p["head"], out=(B, S, V))
    return ops.sum(d["mask"] * ops.cross_entropy_per_token(logits, d["labels"], V))


spec = Spec(params={"emb": (V, H), "head": (H, V)},
            data={"tokens": index(B, S, range=V), "labels": index(B, S, range=V),
                  "mask": mask(B, S)},
            forward=lambda p, d: token_loss_sum(p, d) / ops.sum(d["mask"]),
            optimizer=SGD())

data_placement = {DP: Shard(B), CP: Shard(S)}


def over_dp_cp(x):
    return all_reduce(all_reduce(x, DP), CP)


def forward(p, d):
    s_local = token_loss_sum(p, d)                    # S_{d,c}
    n = over_dp_cp(ops.sum(d["mask"]))                # N = AR_sum[dp x cp](N_{d,c})
    seed = ops.axis_size(CP) * s_local / n            # BUG: cp * S_{d,c} / N
    return Loss(backward=seed, report=over_dp_cp(s_local) / n)


plan = Plan(mesh=Mesh(dp=1, cp=2),
            placements={"tokens": data_placement, "labels": data_placement,
                        "mask": data_placement},
            forward=forward,
            reduce_grads=lambda name, g: over_dp_cp(g))       # summed over dp x cp
