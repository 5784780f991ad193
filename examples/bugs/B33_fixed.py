"""B33 fixed: verl PR #4250, context parallelism with load-balanced chunks and sequence packing.

Spec: next-token targets in global order, t_i = x_{i+1} (``shift``), loss weight
w_i = cont_{i+1} (0 at the last position of every packed sequence and at the end), loss
sum_i w_i ce_i / sum_i w_i for a one-linear-layer model (embedding, head).
Fixed plan: shift in *global* order first, then give CP rank c its chunks c and 2cp-1-c of the
shifted targets and weights with the *same* index map as the tokens (``cp_split``); per-token
loss sums all-reduced over cp, divided by the global weight count.
Smallest configuration (CASES.md B33): cp = 2, one sequence of 4 tokens (one per chunk).
Expected: EQUIVALENT, certificate accepted.
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
    labels = cp_split(next_token_labels(d["tokens"], S), S)        # shift globally, then split
    w = cp_split(next_token_weights(d["cont"], S), S)
    n = all_reduce(ops.sum(w), CP)                                 # global weight count
    local = token_loss_sum(p, tokens, labels, w) / n
    return Loss(backward=local, report=all_reduce(local, CP))


plan = Plan(mesh=Mesh(cp=2), forward=forward,
            reduce_grads=lambda name, g: all_reduce(g, CP, "sum"))
