"""B05 buggy: Hugging Face transformers PR #35808, ZeRO engine + gradient accumulation.

Spec: L = sum_m S_m / N with N = sum_m N_m, the token mean over the accumulation window.
Plan: the trainer already backprops the window-normalised S_m / N (N counted from every
micro-batch's mask before the loop: an all-reduce over the micro-batch axis ``mb``), and the
engine's ``backward`` multiplies the loss by 1/K once more before differentiating (DeepSpeed's
``scale_wrt_gas``). The 1/K is written as the plan node the engine inserts: it scales the
backward seed only; the logged loss is the trainer's S_m / N.
Expected: NOT EQUIVALENT, every gradient is 1/K x the spec: ratio 0.500 on grad:head (K = 2).
Smallest configuration (CASES.md B05): one device, K = 2, any masks.
"""

from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, Spec, all_reduce, index, mask, microbatches, ops,
)

MB = Axis.MB
B, S, H, V = Dim("B", 2), Dim("S", 4), Dim("H", 4), Dim("V", 8)


def token_loss_sum(p, d):
    """S = sum over tokens of mask * cross-entropy; one linear layer (B, S) -> (B, S, V)."""
    x = ops.embedding(d["tokens"], p["emb"], V)
    logits = ops.einsum(x, p["head"], out=(B, S, V))
    return ops.sum(d["mask"] * ops.cross_entropy_per_token(logits, d["labels"], V))


spec = Spec(params={"emb": (V, H), "head": (H, V)},
            data={"tokens": index(B, S, range=V), "labels": index(B, S, range=V),
                  "mask": mask(B, S)},
            forward=lambda p, d: token_loss_sum(p, d) / ops.sum(d["mask"]),
            optimizer=SGD())


def engine_backward(loss):
    """The engine's backward: loss * 1/gradient_accumulation_steps, then autograd."""
    return loss / ops.axis_size(MB)                           # BUG: the loss is already / N


def forward(p, d):
    n_window = all_reduce(ops.sum(d["mask"]), MB)             # N = sum_m N_m, before the loop
    loss = token_loss_sum(p, d) / n_window                    # the trainer's S_m / N
    return Loss(backward=engine_backward(loss), report=loss)


plan = Plan(mesh=Mesh(dp=1), forward=forward, microbatches=microbatches(2, B))
