"""B10 fixed: VeOmni PR #338, Ulysses sequence parallelism + FSDP2 over the flattened dp x sp group.

Spec: L = S / N over all tokens; g = grad S / N.
Plan: the batch is Shard(B) over dp and the sequence Shard(S) over sp (Ulysses). Rank r backprops
``dp * sp * S_r / N`` (the pre-factor is the size of the averaging group) with N = all_reduce over dp x sp of the local token counts. FSDP2 shards the
optimizer step over the flattened dp x sp group: the gradient is reduce-scattered over dp and sp
(along H) and averaged, i.e. scaled by 1/(dp * sp); the updated shards are all-gathered back.
The loss pre-factor (dp * sp) and the averaging group (dp * sp) are separate plan data; the
prover has to cancel them: g_plan = (1 / (dp sp)) sum_r grad(dp sp S_r / N) = g.
Expected: EQUIVALENT, with a certificate.
Smallest configuration (CASES.md B10): dp = 1, sp = 2, one linear layer, 2 tokens (here 2 per
sp rank).
"""

from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_gather, all_reduce, index, mask, ops,
    reduce_scatter,
)

DP, SP = Axis.DP, Axis.SP
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

data_placement = {DP: Shard(B), SP: Shard(S)}
fsdp_shard = {DP: Shard(H), SP: Shard(H)}               # FSDP2 over the flattened dp x sp group
LOSS_PREFACTOR = ops.axis_size(DP) * ops.axis_size(SP)  # the size of the averaging group
FSDP_AVERAGE = 1 / (ops.axis_size(DP) * ops.axis_size(SP))


def forward(p, d):
    n = all_reduce(all_reduce(ops.sum(d["mask"]), DP), SP)     # N = AR_sum[dp x sp](N_r)
    seed = LOSS_PREFACTOR * token_loss_sum(p, d) / n
    return Loss(backward=seed, report=FSDP_AVERAGE * all_reduce(all_reduce(seed, DP), SP))


def fsdp_reduce(name, g):
    """FSDP2 reduce-scatter with averaging over dp x sp."""
    return FSDP_AVERAGE * reduce_scatter(reduce_scatter(g, DP, H), SP, H)


def fsdp_gather(name, shard):
    return all_gather(all_gather(shard, SP, H), DP, H)


plan = Plan(mesh=Mesh(dp=1, sp=2),
            placements={"tokens": data_placement, "labels": data_placement,
                        "mask": data_placement},
            forward=forward, reduce_grads=fsdp_reduce,
            optimizer_placements={"emb": fsdp_shard, "head": fsdp_shard},
            gather_params=fsdp_gather)
