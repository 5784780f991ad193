"""B21 fixed: NeMo Automodel PR #3530, PP + gradient accumulation with the sequence length
changing between micro-batches.

Spec: g = sum_m g_m over the window's micro-batches, each backpropagating its masked loss sum
divided by the window's token count N.
Plan (pp=2, dp=1, 1F1B, M=2 accumulation steps of one micro-batch, sequence lengths 3 and 4 as
plan data): re-initialising the stages for a new sequence length leaves the gradient buffers
alone, so no reset event is derived and the buffer holds g_1 + g_2. Sequences are padded to the
longest length (S = 4) and the padding is masked by the data mask.
Expected: EQUIVALENT, with a certificate.
Buggy (B21_buggy.py): a reset of every buffer when the length changes: the gradient is g_2.
"""

from spec_lang import SGD, Axis, Dim, Mesh, Plan, Spec, all_reduce, index, mask, microbatches
from spec_lang import ops
from spec_lang.pipeline import Pipeline, stage
from spec_lang.schedules import accumulation_steps, one_f_one_b

MB = Axis.MB
LENGTHS = [3, 4]                                     # sequence length of each micro-batch
B, S, H, F, V = Dim("B", 2), Dim("S", max(LENGTHS)), Dim("H", 4), Dim("F", 4), Dim("V", 8)


def hidden(p, tokens):
    """Stage 0: embedding and one linear layer, (B, S) -> (B, S, F)."""
    return ops.tanh(ops.einsum(ops.embedding(tokens, p["emb"], V), p["w0"], out=(B, S, F)))


def masked_ce_sum(p, h, d):
    """Stage 1: output head and masked cross-entropy sum."""
    logits = ops.einsum(h, p["head"], out=(B, S, V))
    return ops.sum(d["mask"] * ops.cross_entropy_per_token(logits, d["labels"], V))


spec = Spec(params={"emb": (V, H), "w0": (H, F), "head": (F, V)},
            data={"tokens": index(B, S, range=V), "labels": index(B, S, range=V),
                  "mask": mask(B, S)},
            forward=lambda p, d: masked_ce_sum(p, hidden(p, d["tokens"]), d) / ops.sum(d["mask"]),
            optimizer=SGD())


def first(p, d, io):
    io.send(hidden(p, d["tokens"]))


def last(p, d, io):
    n_window = all_reduce(ops.sum(d["mask"]), MB)       # N over the window, before the loop
    return masked_ce_sum(p, io.recv(), d) / n_window


schedule = accumulation_steps(one_f_one_b(pp=2, microbatches=1), steps=len(LENGTHS))
# re-initialising the stages for a new length leaves the gradient buffers alone: no reset
pipe = Pipeline([stage(first, ["emb", "w0"]), stage(last, ["head"])], schedule=schedule)
plan = Plan(mesh=Mesh(pp=2), forward=pipe.forward, schedule=pipe,
            microbatches=microbatches(len(LENGTHS), B))
