"""B77 fixed: Megatron-LM #1754, the padding added for tp is masked out of the softmax.

Spec: the model as trained at TP = 1 with ``--make-vocab-size-divisible-by 1``: V = 3 classes,
``head (H, V)``, masked token-mean cross-entropy; SGD. Megatron also allocates the output row
that padding adds at TP = 2 (``head_pad (H, P)``, P = 1); the spec has no such class, so the row
never enters its softmax (its gradient is 0).
Plan: Mesh(tp=2): ``vocab_size_with_padding`` pads V = 3 to 4, and the padded logit is masked
to -inf (its exponential is multiplied by the 0 of the padding mask): the padding introduced to
make V divisible by tp is visible in the plan and provably contributes nothing (no gradient
reaches the padded row).
Expected: EQUIVALENT, with a certificate.
Smallest configuration (CASES2.md B77, derived): tp = 2, V = 3, one position.
"""

from spec_lang import SGD, Axis, Dim, Mesh, Plan, Spec, index, mask, ops, real

TP = Axis.TP
B, S, H, V, P = Dim("B", 1), Dim("S", 1), Dim("H", 2), Dim("V", 3), Dim("P", 1)
PAD_MASK = 0                # the padded class masked out (exp(-inf) = 0)


def ce(p, d, pad_mask):
    z = ops.einsum(d["x"], p["head"], out=(B, S, V))
    z_pad = ops.einsum(d["x"], p["head_pad"], out=(B, S, P))
    m = ops.stop_gradient(ops.max(z, V))
    part = ops.sum(ops.exp(z - m), V)
    if pad_mask is not None:
        part = part + ops.sum(ops.exp(z_pad - m), P) * pad_mask
    target = ops.einsum(z, ops.one_hot(d["labels"], V), out=(B, S))
    per_token = m + ops.log(part) - target
    return ops.sum(d["mask"] * per_token) / ops.sum(d["mask"])


spec = Spec(params={"head": (H, V), "head_pad": (H, P)},
            data={"x": real(B, S, H), "labels": index(B, S, range=V), "mask": mask(B, S)},
            forward=lambda p, d: ce(p, d, None), optimizer=SGD())

plan = Plan(mesh=Mesh(tp=2), forward=lambda p, d: ce(p, d, PAD_MASK))
