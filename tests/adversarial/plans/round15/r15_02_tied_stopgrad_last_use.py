"""Round 15 probe: B64_fixed (tied E across pp=2 stages) with the last stage's use of E stop-gradient (a stale copy: only the lookup's gradient flows). Expected: NOT EQUIVALENT at grad:E."""

from fractions import Fraction

from spec_lang import SGD, Axis, Dim, Mesh, Plan, Spec, all_reduce, index, mask, ops
from spec_lang.pipeline import Pipeline, stage
from spec_lang.schedules import gpipe

PP = Axis.PP
B, S, V, H, K = Dim("B", 2), Dim("S", 2), Dim("V", 4), Dim("H", 2), Dim("K", 2)


def first_stage(p, tokens):
    """Input lookup with E, then W: (B, S) -> (B, S, K)."""
    return ops.einsum(ops.embedding(tokens, p["E"], V), p["W"], out=(B, S, K))


def head_loss(p, h, d):
    """The tied output projection (E, renamed K -> H) and the masked token-mean CE."""
    logits = ops.einsum(ops.rename(h, K, H), p["E"], out=(B, S, V))
    return ops.cross_entropy(logits, d["labels"], d["mask"], V)


spec = Spec(params={"E": (V, H), "W": (H, K)},
            data={"tokens": index(B, S, range=V), "labels": index(B, S, range=V),
                  "mask": mask(B, S)},
            forward=lambda p, d: head_loss(p, first_stage(p, d["tokens"]), d),
            optimizer=SGD(lr=Fraction(1, 10)))


def first(p, d, io):
    io.send(first_stage(p, d["tokens"]))


def last(p, d, io):
    q = {"E": ops.stop_gradient(p["E"])}
    return head_loss(q, io.recv(), d)


pipe = Pipeline([stage(first, ["E", "W"]), stage(last, ["E"])],
                schedule=gpipe(pp=2, microbatches=1))
plan = Plan(mesh=Mesh(pp=2), forward=pipe.forward, schedule=pipe,
            reduce_grads={"E": lambda name, g: all_reduce(g, PP)})   # the tied copies' group
