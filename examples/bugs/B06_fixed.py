"""B06 fixed: torchtitan #1733 / PR #1732, PP schedule with n micro-batches per step + K
gradient-accumulation steps.

Spec: the mean over all K*n micro-batches (equal sizes, no padding), so
g = (1/(K*n)) * sum_k sum_j g_{k,j}, g_{k,j} the gradient of micro-batch (k, j)'s mean loss.
Plan (pp=2, 1F1B, n=2, K=2): the schedule's own gradient scaling is off and each micro-batch
loss is scaled once by 1/(n*K); the buffer only accumulates across the K steps:
G_k = G_{k-1} + sum_j g_{k,j} / (n*K). Buffer coefficients 1, 1, 1, 1 (times the loss's 1/4).
Expected: EQUIVALENT, with a certificate.
Buggy (B06_buggy.py): 1/K in the loss and the schedule divides the whole buffer by n per step.
"""

from spec_lang import SGD, Dim, Mesh, Plan, Spec, index, microbatches, ops
from spec_lang.pipeline import Pipeline, stage
from spec_lang.schedules import accumulation_steps, one_f_one_b

N_PER_STEP, K = 2, 2
B, S, H, F, V = Dim("B", 4), Dim("S", 2), Dim("H", 4), Dim("F", 4), Dim("V", 8)


def embed(p, tokens):
    """Stage 0: embedding and one linear layer, (B, S) -> (B, S, F)."""
    return ops.tanh(ops.einsum(ops.embedding(tokens, p["emb"], V), p["w0"], out=(B, S, F)))


def ce_sum(p, h, labels):
    """Stage 1: output head, summed cross-entropy over the tokens here."""
    return ops.sum(ops.cross_entropy_per_token(ops.einsum(h, p["head"], out=(B, S, V)),
                                               labels, V))


spec = Spec(params={"emb": (V, H), "w0": (H, F), "head": (F, V)},
            data={"tokens": index(B, S, range=V), "labels": index(B, S, range=V)},
            forward=lambda p, d: ce_sum(p, embed(p, d["tokens"]), d["labels"])
            / (ops.dim_size(B) * ops.dim_size(S)),
            optimizer=SGD())


def first(p, d, io):
    io.send(embed(p, d["tokens"]))


def last(p, d, io):
    tokens_per_mb = ops.dim_size(B) / ops.axis_size("mb") * ops.dim_size(S)
    mb_mean = ce_sum(p, io.recv(), d["labels"]) / tokens_per_mb
    return mb_mean / (N_PER_STEP * K)                      # 1/(n*K), once


step = one_f_one_b(pp=2, microbatches=N_PER_STEP)
pipe = Pipeline([stage(first, ["emb", "w0"]), stage(last, ["head"])],
                schedule=accumulation_steps(step, K))         # schedule scaling off
plan = Plan(mesh=Mesh(pp=2), forward=pipe.forward, schedule=pipe,
            microbatches=microbatches(N_PER_STEP * K, B))
