"""B30 fixed: Megatron-LM issues #737 and #7464, vocab-parallel cross-entropy with label smoothing.

Spec: per token, logits z over V, p = softmax(z), smoothing alpha, a = alpha * V / (V - 1)
(Megatron's rescaling): L_i = (1 - a) (-log p_y) - (a / V) sum_v log p_v, i.e. PyTorch's
``cross_entropy(..., label_smoothing=a)``; the loss is the mean over the B x S positions.
Plan: Megatron tensor parallelism on Mesh(tp=2): the output head is column-parallel (Shard(V)),
so each rank holds the logits of its V / tp vocab block; the cross-entropy is vocab-parallel
(all-reduced max, sum-exp and target logit). The smoothing uses the global V in a, and the
smoothing term is AR_sum[tp](sum_{v in shard t} log p_v) / V (Megatron's fix: the local sum
goes through ``reduce_from_tp_region``, all-reduce forward, identity backward).
Expected: EQUIVALENT, with a certificate.
Smallest configuration (CASES.md B30): tp = 2, V = 8, 6 token positions (B = 2, S = 3),
alpha = 0.1 (alpha = 0 or tp = 1 hides it).
"""

from spec_lang import (
    SGD, Axis, Dim, Mesh, Plan, Shard, Spec, all_reduce, copy_to_tp_region, index, ops,
    reduce_from_tp_region,
)

TP = Axis.TP
B, S, H, V = Dim("B", 2), Dim("S", 3), Dim("H", 4), Dim("V", 8)
ALPHA = 0.1


def smoothing(v_size):
    """Megatron's rescaled smoothing a = alpha * V / (V - 1) for a vocab of ``v_size``."""
    return ALPHA * v_size / (v_size - 1)


def spec_forward(p, d):
    x = ops.embedding(d["tokens"], p["emb"], V)
    logits = ops.einsum(x, p["head"], out=(B, S, V))
    a = smoothing(ops.dim_size(V))
    return ops.mean(ops.cross_entropy_per_token(logits, d["labels"], V, label_smoothing=a))


spec = Spec(params={"emb": (V, H), "head": (H, V)},
            data={"tokens": index(B, S, range=V), "labels": index(B, S, range=V)},
            forward=spec_forward, optimizer=SGD())


def vocab_parallel_cross_entropy(logits, labels):
    """Megatron's vocab-parallel CE on (B, S, V[tp]) logits: returns (ce, local log-probs)."""
    m = ops.stop_gradient(all_reduce(ops.max(logits, V), TP, "max"))
    sum_exp = reduce_from_tp_region(ops.sum(ops.exp(logits - m), V))
    target = reduce_from_tp_region(
        ops.einsum(logits, ops.one_hot(labels, V, shards=(TP,)), out=(B, S)))
    lse = m + ops.log(sum_exp)
    return lse - target, logits - lse                    # (B, S), (B, S, V[tp])


def forward(p, d):
    x = copy_to_tp_region(ops.embedding(d["tokens"], p["emb"], V))
    logits = ops.einsum(x, p["head"], out=(B, S, V))    # column-parallel head: V[tp]
    ce, log_probs = vocab_parallel_cross_entropy(logits, d["labels"])
    a = smoothing(ops.dim_size(V))                       # the global vocab size
    mean_log_probs = reduce_from_tp_region(ops.sum(log_probs, V)) / ops.dim_size(V)
    return ops.mean((1 - a) * ce - a * mean_log_probs)


plan = Plan(mesh=Mesh(tp=2), placements={"head": {TP: Shard(V)}}, forward=forward)
