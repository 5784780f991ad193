"""B30 buggy: Megatron-LM issues #737 and #7464, vocab-parallel cross-entropy with label smoothing.

Spec: per token, logits z over V, p = softmax(z), smoothing alpha, a = alpha * V / (V - 1)
(Megatron's rescaling): L_i = (1 - a) (-log p_y) - (a / V) sum_v log p_v, i.e. PyTorch's
``cross_entropy(..., label_smoothing=a)``; the loss is the mean over the B x S positions. Its
gradient on a non-target logit is p_v - alpha / (V - 1).
Plan: Megatron tensor parallelism on Mesh(tp=2): the output head is column-parallel (Shard(V)),
so each rank holds the logits of its V / tp vocab block. ``_VocabParallelCrossEntropy`` is an
autograd function: its forward is the vocab-parallel loss (all-reduced max, sum-exp and target
logit), its backward is hand-written, ``grad_z = softmax - (1 - a) onehot(y) - a / V_used`` on
the rank's block. The plan keeps the two apart (``Loss(backward=, report=)``): the report is
the forward value, the backward seed is a per-token term whose gradient in the local logits *is*
that hand-written backward (``lse - (1 - a) z_y - (a / V_used) sum_local z``; ``lse`` and
``z_y`` come through ``reduce_from_tp_region``, identity backward, so d lse / d z_v = p_v).
The bug: V_used = V_loc = V / tp in a, and the forward averages only the rank's own V_loc
log-probs with no reduction over tp:
L_i^(t) = (1 - a_loc) (-log p_y) - (a_loc / V_loc) sum_{v in shard t} log p_v,
a_loc = alpha V_loc / (V_loc - 1); the backward gives p_v - alpha / (V_loc - 1).
Expected: NOT EQUIVALENT: the ranks' losses differ from each other and from the spec (loss goal,
values differ per tp rank); every gradient differs.
Smallest configuration (CASES.md B30): tp = 2, V = 8, 6 token positions (B = 2, S = 3),
alpha = 0.1 (alpha = 0 or tp = 1 hides it).
"""

from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, copy_to_tp_region, index, ops,
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


def vocab_parallel_cross_entropy(logits, labels, v_used, reduce_smoothing):
    """Megatron's ``_VocabParallelCrossEntropy`` with label smoothing on (B, S, V[tp]) logits.

    Returns (backward seed, loss) per token, both (B, S): the seed's gradient in the rank's
    logits is the hand-written backward ``p - (1 - a) onehot - a / v_used``.
    """
    m = ops.stop_gradient(all_reduce(ops.max(logits, V), TP, "max"))
    sum_exp = reduce_from_tp_region(ops.sum(ops.exp(logits - m), V))
    target = reduce_from_tp_region(
        ops.einsum(logits, ops.one_hot(labels, V, shards=(TP,)), out=(B, S)))
    lse = m + ops.log(sum_exp)
    a = smoothing(v_used)
    local_log_probs = ops.sum(logits - lse, V)            # sum over the rank's vocab block
    if reduce_smoothing:
        mean_log_probs = all_reduce(local_log_probs, TP) / v_used
    else:
        mean_log_probs = local_log_probs / v_used
    loss = (1 - a) * (lse - target) - a * mean_log_probs
    seed = lse - (1 - a) * target - a / v_used * ops.sum(logits, V)
    return seed, loss


def forward(p, d):
    x = copy_to_tp_region(ops.embedding(d["tokens"], p["emb"], V))
    logits = ops.einsum(x, p["head"], out=(B, S, V))    # column-parallel head: V[tp]
    v_local = ops.dim_size(V) / ops.axis_size(TP)       # BUG: the local vocab size, and ...
    seed, loss = vocab_parallel_cross_entropy(logits, d["labels"], v_local,
                                              reduce_smoothing=False)   # ... no reduction
    return Loss(backward=ops.mean(seed), report=ops.mean(loss))


plan = Plan(mesh=Mesh(tp=2), placements={"head": {TP: Shard(V)}}, forward=forward)
