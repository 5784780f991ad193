"""Round 32: r32_01's crossing layer marks with a WRONG plan (its loss is 3x the spec's):
NOT EQUIVALENT at 853d73d and at a43a49e (the loss lemma is refuted, then the goals)."""
from spec_lang import SGD, Dim, Loss, Mesh, Plan, Spec, ops, real

B, H = Dim("B", 4), Dim("H", 4)
SCALE = 3


def spec_model(p, d):
    a = ops.layer_boundary(d["x"] * d["x"], "a")
    b = ops.layer_boundary((d["x"] + d["x"]) * d["x"] + (a - a), "b")
    return ops.sum(b * p["w"]) / ops.dim_size(B)


spec = Spec(params={"w": (H,)}, data={"x": real(B, H)}, forward=spec_model, optimizer=SGD())


def forward(p, d):
    t = ops.layer_boundary(d["x"] * d["x"] * 2, "b")
    pa = ops.layer_boundary(d["x"] * d["x"] + (t - t), "a")
    loss = ops.sum((t + (pa - pa)) * p["w"]) * SCALE / ops.dim_size(B)
    return Loss(backward=loss, report=loss)


plan = Plan(mesh=Mesh(dp=2), placements={}, forward=forward, reduce_grads=lambda name, g: g)
