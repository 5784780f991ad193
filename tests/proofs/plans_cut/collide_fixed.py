"""Name collision: a forward mark named 'v:adj' and the backward cut of mark 'v' (named 'v:adj')."""
from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real

DP = Axis.DP
B, H = Dim("B", 4), Dim("H", 4)
SCALE = 1


def model(p, d, scale=1):
    a = d["x"] * d["x"] * scale
    a = ops.layer_boundary(a, "v:adj")
    b = a * p["w"]
    b = ops.layer_boundary(b, "v")
    return ops.sum(b) / ops.dim_size(B)


spec = Spec(params={"w": (H,)}, data={"x": real(B, H)}, forward=model, optimizer=SGD())


def forward(p, d):
    loss = model(p, d, SCALE)
    return Loss(backward=loss, report=loss)


plan = Plan(mesh=Mesh(dp=2), placements={}, forward=forward,
            reduce_grads=lambda name, g: g)
