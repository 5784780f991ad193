"""Round 30 (B, the backward-factor pre-pass): B07_fixed with the gradient into the received activation doubled (the
embedding's gradient x2, the head's right): wrong below the top cut."""


from spec_lang import SGD, Dim, Mesh, Plan, Spec, index, mask, ops
from spec_lang.pipeline import Pipeline, stage
from spec_lang.schedules import one_f_one_b
from spec_lang.hooks import scale_grad

B, S, H, V = Dim("B", 2), Dim("S", 4), Dim("H", 4), Dim("V", 8)


def first_layer(p, tokens):
    """Stage 0: one linear layer on the one-hot tokens (an embedding), (B, S) -> (B, S, H)."""
    return ops.embedding(tokens, p["emb"], V)


def masked_ce_sum(p, h, d):
    """Stage 1: one linear layer (the head) and the masked cross-entropy sum S."""
    logits = ops.einsum(h, p["head"], out=(B, S, V))
    return ops.sum(d["mask"] * ops.cross_entropy_per_token(logits, d["labels"], V))


spec = Spec(params={"emb": (V, H), "head": (H, V)},
            data={"tokens": index(B, S, range=V), "labels": index(B, S, range=V),
                  "mask": mask(B, S)},
            forward=lambda p, d: masked_ce_sum(p, first_layer(p, d["tokens"]), d)
            / ops.sum(d["mask"]),
            optimizer=SGD())


def first(p, d, io):
    io.send(first_layer(p, d["tokens"]))


def last(p, d, io):
    s_j = masked_ce_sum(p, scale_grad(io.recv(), 2), d)   # the embedding's gradient x2
    n_glob = ops.sum(d["mask"])
    return s_j / n_glob                       # N_glob handed to the loss: backprop S_j / N_glob


pipe = Pipeline([stage(first, ["emb"]), stage(last, ["head"])],
                schedule=one_f_one_b(pp=2, microbatches=1))
plan = Plan(mesh=Mesh(pp=2), forward=pipe.forward, schedule=pipe)   # one micro-batch
