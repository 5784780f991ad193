"""group_identical fast path false reuse: a literal '#' in a parameter name ('layers.#.v') has the
same layer-erased pattern as 'layers.1.v'. The plan's gradient reducer adds v_l - u_l to the
gradient of layers.l.w, with u_1 = layers.1.v (so +0) but u_0 = 'layers.#.v' (wrong: the
gradient of layers.0.w is off by v0 - v#). The premise of grad:layers.0.w is declared a renaming
of the (true) premise of grad:layers.1.w (built first), although it maps two distinct inputs onto one."""
from spec_lang import SGD, Dim, Loss, Mesh, Plan, Spec, ops, real

B, H = Dim("B", 4), Dim("H", 4)
BUG = False
_P = {}


def model(p, d):
    x = d["x"]
    y = 0
    for i in (0, 1):
        w, v = p[f"layers.{i}.w"], p[f"layers.{i}.v"]
        y = y + ops.sum(x * w * v) / ops.dim_size(B)
    return y + ops.sum(p["layers.#.v"] * p["layers.#.v"])


spec = Spec(params={"layers.0.w": (H,), "layers.0.v": (H,), "layers.1.w": (H,),
                    "layers.1.v": (H,), "layers.#.v": (H,)},
            data={"x": real(B, H)}, forward=model, optimizer=SGD())


def forward(p, d):
    _P.clear()
    _P.update({k: p[k] for k in spec.params})
    loss = model(p, d)
    return Loss(backward=loss, report=loss)


def reduce_grads(name, g):
    if name in ("layers.0.w", "layers.1.w"):
        i = name.split(".")[1]
        v = _P[f"layers.{i}.v"]
        u = _P["layers.#.v"] if (BUG and i == "0") else v
        return g + v - u
    return g


plan = Plan(mesh=Mesh(dp=2), placements={}, forward=forward, reduce_grads=reduce_grads)
