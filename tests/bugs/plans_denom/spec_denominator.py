"""Issue 10: a denominator of the *spec* that the input domains do not settle. The spec divides by
``sum(w)`` with ``w`` real data and multiplies back; it is defined only where ``sum(w) != 0``, so
that is an assumption of the verdict (listed with it), under which the cancellation in the spec
is justified. The plan never divides. Expected: EQUIVALENT with the assumption
``sum(w) != 0``; the goals' proofs rest on it, so none is a renaming of another."""

from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real

DP = Axis.DP
B, H = Dim("B", 4), Dim("H", 2)


def body(p, d):
    return ops.sum(d["x"] * p["a"]) + ops.sum(d["y"] * p["b"])


spec = Spec(params={"a": (H,), "b": (H,)},
            data={"x": real(B, H), "y": real(B, H), "w": real(B)},
            forward=lambda p, d: body(p, d) / ops.sum(d["w"]) * ops.sum(d["w"]), optimizer=SGD())


def forward(p, d):
    local = body(p, d)
    return Loss(backward=local, report=all_reduce(local, DP))


plan = Plan(mesh=Mesh(dp=2), forward=forward,
            placements={k: {DP: Shard(B)} for k in ("x", "y", "w")},
            reduce_grads=lambda name, g: all_reduce(g, DP))
