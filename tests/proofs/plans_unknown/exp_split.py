"""UNKNOWN by design (issue 12 item 2): the plan writes exp(a + b) as exp(a) * exp(b), a true
identity that no rewrite rule joins (exp's homomorphism is not a rule). The two sides stop
matching at the exp of the spec (line 15) and the product of the plan (line 20)."""
from spec_lang import SGD, Dim, Mesh, Plan, Spec, ops, real

B, H = Dim("B", 2), Dim("H", 3)


def hidden(p, d):
    return ops.einsum(d["x"], p["w"], out=(B,))


def spec_loss(p, d):
    h = hidden(p, d)
    return ops.sum(ops.exp(h + d["b"]) * d["t"])


def plan_loss(p, d):
    h = hidden(p, d)
    e = ops.exp(h) * ops.exp(d["b"])
    return ops.sum(e * d["t"])


spec = Spec(params={"w": (H,)}, data={"x": real(B, H), "b": real(B), "t": real(B)},
            forward=spec_loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=1), placements={}, forward=plan_loss)
