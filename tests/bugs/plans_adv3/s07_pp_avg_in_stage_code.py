"""B22 fixed: torchtitan #596 / PR #649, pipeline parallelism with gradient-norm clipping.

Spec: u = g * min(1, c / ||g||) with ||g||^2 = sum over *all* stages' parameters of sum g^2
(PyTorch ``clip_grad_norm_``: the coefficient is c / (||g|| + 1e-6)); c = 1/100 here.
Plan (pp=2, one linear layer per stage): each stage computes the squared norm of the gradients
it holds (``global_grad_norm_sq`` of spec_lang/plans/clipping.py, placement-derived), then
nu^2 = AR_sum[pp](||g_s||^2), and every stage clips with nu.
Expected: EQUIVALENT, with a certificate.
Buggy (B22_buggy.py): each stage clips with its own ||g_s||, never summed over pp.
"""

from fractions import Fraction

from spec_lang import SGD, Axis, Dim, Mesh, Plan, Spec, all_reduce, index, mask
from spec_lang import ops
from spec_lang.pipeline import Pipeline, stage
from spec_lang.plans.clipping import global_grad_norm_sq
from spec_lang.schedules import one_f_one_b

PP = Axis.PP
B, S, H, V = Dim("B", 2), Dim("S", 4), Dim("H", 4), Dim("V", 8)


def first_layer(p, tokens):
    """Stage 0: one linear layer on one-hot tokens (an embedding), (B, S) -> (B, S, H)."""
    return ops.embedding(tokens, p["emb"], V)


def masked_ce_sum(p, h, d):
    """Stage 1: one linear layer (the head) and the masked cross-entropy sum."""
    logits = ops.einsum(h, p["head"], out=(B, S, V))
    return ops.sum(d["mask"] * ops.cross_entropy_per_token(logits, d["labels"], V))


spec = Spec(params={"emb": (V, H), "head": (H, V)},
            data={"tokens": index(B, S, range=V), "labels": index(B, S, range=V),
                  "mask": mask(B, S)},
            forward=lambda p, d: masked_ce_sum(p, first_layer(p, d["tokens"]), d)
            / ops.sum(d["mask"]),
            optimizer=SGD(lr=Fraction(1, 10)), clip_grad_norm=Fraction(1, 100))


def first(p, d, io):
    n = ops.sum(d["mask"])
    c0 = all_reduce(n, PP, "avg")                 # hardware: pairs with stage 1's all-reduce
    io.send(first_layer(p, d["tokens"]) * (c0 / n))   # model: c0 = n, factor 1


def last(p, d, io):
    n = ops.sum(d["mask"])
    c1 = all_reduce(3 * n, PP, "avg")              # issued before recv: one pp collective per stage
    return masked_ce_sum(p, io.recv(), d) / (c1 / 3)  # model: c1 = 3n


pipe = Pipeline([stage(first, ["emb"]), stage(last, ["head"])],
                schedule=one_f_one_b(pp=2, microbatches=1))


def stage_norm_sq(grads):
    # each stage: the squared norm of the gradients it holds, then summed over the stages
    return all_reduce(pipe.per_stage(lambda s: global_grad_norm_sq(pipe.stage_grads(s, grads))),
                      PP)


plan = Plan(mesh=Mesh(pp=2), forward=pipe.forward, schedule=pipe, grad_norm_sq=stage_norm_sq)
