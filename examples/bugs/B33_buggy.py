"""B33 buggy: verl PR #4250, context parallelism with load-balanced chunks and sequence packing.

Spec: next-token targets in global order, t_i = x_{i+1} (``shift``), loss weight
w_i = cont_{i+1} (0 at the last position of every packed sequence and at the end), loss
sum_i w_i ce_i / sum_i w_i for a one-linear-layer model (embedding, head).
Buggy plan: the tokens are split first with the load-balanced map (rank c holds chunks c and
2cp-1-c), then targets and weights are made by shifting within the rank's *local*
concatenation, so the position at the end of a local chunk is paired with a token from the
wrong place. With cp = 2 and 4 tokens rank 0 holds positions {0, 3} and rank 1 {1, 2}:
position 0 gets target x_3 (spec x_1), position 2 gets nothing (spec x_3).
Expected: NOT EQUIVALENT, the first diverging goal is ``loss`` (values differ: not a factor).
"""

from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Spec, all_reduce, index, mask, ops
from spec_lang.cp import cp_split, next_token_labels, next_token_weights

CP = Axis.CP
B, S, H, V = Dim("B", 1), Dim("S", 4), Dim("H", 4), Dim("V", 8)


def token_loss_sum(p, tokens, labels, w):
    """sum over tokens of w * cross-entropy(head(embedding(tokens)), labels)."""
    x = ops.embedding(tokens, p["emb"], V)
    logits = ops.einsum(x, p["head"], out=(B, S, V))
    return ops.sum(w * ops.cross_entropy_per_token(logits, labels, V))


def spec_loss(p, d):
    labels, w = next_token_labels(d["tokens"], S), next_token_weights(d["cont"], S)
    return token_loss_sum(p, d["tokens"], labels, w) / ops.sum(w)


spec = Spec(params={"emb": (V, H), "head": (H, V)},
            data={"tokens": index(B, S, range=V), "cont": mask(B, S)},
            forward=spec_loss, optimizer=SGD())


def forward(p, d):
    tokens = cp_split(d["tokens"], S)                              # chunks c, 2cp-1-c
    cont = cp_split(d["cont"], S)
    labels = next_token_labels(tokens, S)                          # BUG: shift after the split
    w = next_token_weights(cont, S)
    n = all_reduce(ops.sum(w), CP)
    local = token_loss_sum(p, tokens, labels, w) / n
    return Loss(backward=local, report=all_reduce(local, CP))


plan = Plan(mesh=Mesh(cp=2), forward=forward,
            reduce_grads=lambda name, g: all_reduce(g, CP, "sum"))
