"""Round 32 (R32c-1): crossing layer marks. The spec marks 'a' below 'b'; the plan marks 'b'
below 'a'. Each mark's value is the same on both sides (the extra terms cancel), so each cut
premise holds over the other cut's variable: the premises use each other (a cycle). The plan is
correct (EQUIVALENT over the reals); at 853d73d the prover left the goals open (UNKNOWN,
"premise a: premise b: not proved"); at a43a49e ``assemble_cuts`` raises KeyError."""
from spec_lang import SGD, Dim, Loss, Mesh, Plan, Spec, ops, real

B, H = Dim("B", 4), Dim("H", 4)
SCALE = 1


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
