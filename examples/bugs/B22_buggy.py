"""B22 buggy: torchtitan #596 / PR #649, pipeline parallelism with gradient-norm clipping.

Spec: u = g * min(1, c / ||g||) with ||g||^2 = sum over *all* stages' parameters of sum g^2
(PyTorch ``clip_grad_norm_``: the coefficient is c / (||g|| + 1e-6)).
Plan (pp=2, one linear layer per stage): stage s clips its own parameters with its own norm
nu_s = ||g_s|| (the squared norm of the parameters it holds, from the placement-derived
``global_grad_norm_sq`` of spec_lang/plans/clipping.py), never summed over pp. With ||g_0|| = 3,
||g_1|| = 4 and c = 1 the spec scales both stages by 1/5, the plan by 1/3 and 1/4.
Here c = 1/100, so clipping is active for any random draw of the refuter.
Expected: NOT EQUIVALENT: the reported ``grad_norm`` is ||g_s|| on stage s instead of ||g||, and
every updated parameter differs (raw gradients are right).
Fixed (B22_fixed.py): nu^2 = AR_sum[pp](||g_s||^2) on every stage.
"""

from fractions import Fraction

from spec_lang import SGD, Axis, Dim, Mesh, Plan, Spec, index, mask
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
    io.send(first_layer(p, d["tokens"]))


def last(p, d, io):
    return masked_ce_sum(p, io.recv(), d) / ops.sum(d["mask"])


pipe = Pipeline([stage(first, ["emb"]), stage(last, ["head"])],
                schedule=one_f_one_b(pp=2, microbatches=1))


def stage_norm_sq(grads):
    # each stage: the squared norm of the gradients it holds; not reduced over pp
    return pipe.per_stage(lambda s: global_grad_norm_sq(pipe.stage_grads(s, grads)))


plan = Plan(mesh=Mesh(pp=2), forward=pipe.forward, schedule=pipe, grad_norm_sq=stage_norm_sq)
