"""Round 52a, p05_where: where(m, x, y) vs x: false where m = 0."""
from spec_lang import SGD, Axis, Dim, Mesh, Plan, Spec, mask, ops, positive, real  # noqa: F401

B, H = Dim("B", 2), Dim("H", 2)


def spec_loss(p, d):
    x, y, m = d["x"], d["y"], d["m"]  # noqa: F841
    return ops.sum((ops.where(m, x, y)) * p["w"]) / ops.dim_size(B)


def plan_loss(p, d):
    x, y, m = d["x"], d["y"], d["m"]  # noqa: F841
    return ops.sum((x) * p["w"]) / ops.dim_size(B)


spec = Spec(params={"w": (B, H)}, data={"x": real(B, H), "y": real(B, H), "m": mask(B, H)},
            forward=spec_loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=1), placements={}, forward=plan_loss)
