"""B21 buggy: NeMo Automodel PR #3530, PP + gradient accumulation with the sequence length
changing between micro-batches.

Spec: g = sum_m g_m over the window's micro-batches, each backpropagating its masked loss sum
divided by the window's token count N.
Plan (pp=2, dp=1, 1F1B, M=2 accumulation steps of one micro-batch, sequence lengths 3 and 4):
when a micro-batch's sequence length differs from the previous one, the pipeline stages are
re-initialised and the re-initialisation sets every parameter gradient to None, discarding the
accumulated buffer. The length pattern is plan data (``LENGTHS``); the events it implies (a
``reset`` before step 2) are derived from it, so this file verifies the variable-length case.
Sequences are padded to the longest length (S = 4) and the padding is masked by the data mask
(the spec's mask is a free input, so the verdict covers every mask, the padded one included).
Expected: NOT EQUIVALENT: every gradient is g_2, the first micro-batch's contribution is
missing (values differ). Equal lengths (e.g. 4 and 4) derive no reset and hide it.
Fixed (B21_fixed.py): the re-initialisation leaves the gradients alone (no reset event).
"""

from spec_lang import SGD, Axis, Dim, Mesh, Plan, Spec, all_reduce, index, mask, microbatches
from spec_lang import ops
from spec_lang.pipeline import Pipeline, stage
from spec_lang.schedules import accumulation_steps, one_f_one_b, reset_on_length_change

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


schedule = accumulation_steps(one_f_one_b(pp=2, microbatches=1), steps=len(LENGTHS),
                              start_of_step=reset_on_length_change(LENGTHS))
pipe = Pipeline([stage(first, ["emb", "w0"]), stage(last, ["head"])], schedule=schedule)
plan = Plan(mesh=Mesh(pp=2), forward=pipe.forward, schedule=pipe,
            microbatches=microbatches(len(LENGTHS), B))
