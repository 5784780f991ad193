"""The spec does not clip; the plan declares ``Plan(clip_grad_norm=1/100)`` (adversarial finding
F2). The plan's clipping used to be dropped silently (EQUIVALENT). With x = [[1, 2], [3, 4]],
w = [1, 1] the gradient is [48, 68] (norm 83.2): the spec's SGD step gives w' = [0.52, 0.32], the
plan's about [0.99994, 0.99992]. Expected: NOT EQUIVALENT at goal w."""
from fractions import Fraction

from spec_lang import SGD, Dim, Mesh, Plan, Spec, ops, real

B, H = Dim("B", 2), Dim("H", 2)


def f(p, d):
    return ops.sum(ops.einsum(d["x"], p["w"], out=(B,)) ** 2)


spec = Spec(params={"w": (H,)}, data={"x": real(B, H)}, forward=f, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=1), forward=f, clip_grad_norm=Fraction(1, 100),
            grad_norm_sq=lambda g: ops.sum(g["w"] * g["w"]))
