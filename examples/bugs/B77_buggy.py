"""B77 buggy: Megatron-LM #1754, the padded vocabulary size depends on tp (extra unmasked softmax
classes).

Spec: the model as trained at TP = 1 with ``--make-vocab-size-divisible-by 1``: V = 3 classes,
``head (H, V)``, masked token-mean cross-entropy; SGD. Megatron also allocates the output row
that padding adds at TP = 2 (``head_pad (H, P)``, P = 1); the spec has no such class, so the row
never enters its softmax (its gradient is 0).
Plan: Mesh(tp=2): ``vocab_size_with_padding`` pads V = 3 to 4 (a multiple of
``make_vocab_size_divisible_by x tp``) and the padded row is a real, trainable class of the
softmax: ``L_plan = log(sum_{v<V} e^{z_v} + e^{z_pad}) - z_y``. (The model is replicated over tp
here: the bug is in the vocabulary, not in the sharding.)
Expected: NOT EQUIVALENT at ``loss`` (values: the padded class adds to the partition function)
and at the gradients of ``head`` and ``head_pad``.
Smallest configuration (CASES2.md B77, derived): tp = 2, V = 3, one position.
"""

from spec_lang import SGD, Axis, Dim, Mesh, Plan, Spec, index, mask, ops, real

TP = Axis.TP
B, S, H, V, P = Dim("B", 1), Dim("S", 1), Dim("H", 2), Dim("V", 3), Dim("P", 1)
PAD_MASK = 1                # BUG: the padded class is unmasked (1: in the softmax)


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
