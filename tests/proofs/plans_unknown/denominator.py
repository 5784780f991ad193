"""UNKNOWN by design (issue 12 item 2): the plan multiplies by s and divides by s again, where s
is a data input that may be zero (the spec has no such denominator), so cancelling it needs
s != 0, which nothing shows."""
from spec_lang import SGD, Dim, Mesh, Plan, Spec, ops, real

B, H = Dim("B", 2), Dim("H", 3)


def spec_loss(p, d):
    y = ops.einsum(d["x"], p["w"], out=(B,))
    return ops.sum(y * y * d["t"])


def plan_loss(p, d):
    y = ops.einsum(d["x"], p["w"], out=(B,))
    z = (y * d["s"]) / d["s"]
    return ops.sum(z * y * d["t"])


spec = Spec(params={"w": (H,)}, data={"x": real(B, H), "t": real(B), "s": real(B)},
            forward=spec_loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=1), placements={}, forward=plan_loss)
