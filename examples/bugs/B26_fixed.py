"""B26 fixed: PyTorch issues #149768 and #163193, DTensor Partial placement + a Python scalar.

Spec: y = sum_i w_i x_i + 10, a scalar loss over x (N,) (with w = 1: y = x.sum() + 10).
Plan: x and w are Shard(N) over dp (2 ranks, as DTensor ``Shard(0)``). The local sum is each
rank's addend of a pending sum (``Partial("sum")``); it is reduced (Partial -> Replicate) before
the Python scalar is added: y = AR_sum(a_r) + 10.
Expected: EQUIVALENT, with a certificate (x = 0..9, w = 1: 55 on every rank).
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
    y = all_reduce(pending, DP) + SCALAR        # Partial -> Replicate, then add
    return Loss(backward=pending, report=y)     # the constant has no gradient


plan = Plan(mesh=Mesh(dp=2), placements={"w": {DP: Shard(N)}, "x": {DP: Shard(N)}},
            forward=forward)
