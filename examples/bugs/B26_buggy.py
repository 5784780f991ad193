"""B26 buggy: PyTorch issues #149768 and #163193, DTensor Partial placement + a Python scalar.

Spec: y = sum_i w_i x_i + 10, a scalar loss over x (N,) (with w = 1: y = x.sum() + 10).
Plan: x and w are Shard(N) over dp (2 ranks, as DTensor ``Shard(0)``). The local sum
``sum_i w_i x_i`` over a dp-sharded dim is each rank's addend of a pending sum (a
``Partial("sum")`` DTensor); adding the Python scalar 10 to it adds 10 to *every* addend, so the
reduction gives y_plan = sum_r (a_r + 10) = y + (R - 1) * 10. (Adding a 0-d tensor took the
correct path.) The same mistake in FSDP2's ``clip_grad_norm_`` adds eps to the pending total norm:
an error of (R - 1) * eps.
Expected: NOT EQUIVALENT on ``loss``: with x = 0..9 and w = 1 the plan reports 65, the spec 55
(plan - spec = (R - 1) * 10 = 10 for any input). Gradients match (the constant has none).
Smallest configuration (CASES.md B26): 2 ranks, x = 0..9 with Shard(0).
"""

from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real

DP = Axis.DP
N = Dim("N", 10)
SCALAR = 10                                    # the Python scalar (or eps in clipping)

spec = Spec(params={"w": (N,)}, data={"x": real(N)},
            forward=lambda p, d: ops.sum(p["w"] * d["x"]) + SCALAR,
            optimizer=SGD())


def forward(p, d):
    pending = ops.sum(p["w"] * d["x"])          # this rank's addend: Partial("sum") over dp
    y = pending + SCALAR                        # BUG: the scalar joins every rank's addend
    return Loss(backward=y, report=all_reduce(y, DP))


plan = Plan(mesh=Mesh(dp=2), placements={"w": {DP: Shard(N)}, "x": {DP: Shard(N)}},
            forward=forward)
