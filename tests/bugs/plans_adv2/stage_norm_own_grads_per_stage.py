"""adv2 F1 control (adversary's K03): each stage squares "all" gradients, i.e. the ones it
holds (a gradient exists only on its stage), then the sum over pp: the global norm.
Expected: EQUIVALENT (it was refuted when every stage seemed to hold every gradient).
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
    io.send(first_layer(p, d["tokens"]))


def last(p, d, io):
    return masked_ce_sum(p, io.recv(), d) / ops.sum(d["mask"])


pipe = Pipeline([stage(first, ["emb"]), stage(last, ["head"])],
                schedule=one_f_one_b(pp=2, microbatches=1))


def stage_norm_sq(grads):
    # each stage: the squared norm of the gradients it holds, then summed over the stages
    return all_reduce(pipe.per_stage(lambda s: global_grad_norm_sq(pipe.stage_grads(s, grads))),
                      PP)


plan = Plan(mesh=Mesh(pp=2), forward=pipe.forward, schedule=pipe, grad_norm_sq=lambda grads: all_reduce(
                pipe.per_stage(lambda s: global_grad_norm_sq(grads)), PP))
