"""B69 buggy: PyTorch #179502, DTensor ``view`` of a ``Shard(1)`` tensor returned as ``Shard(0)``
without redistribution.

Spec: an activation ``x`` (R, C) = [4, 4] viewed row-major as ``(R2, C2)`` = (8, 2)
(``x.view(8, 2)``: row ``2 i + j`` is columns ``[2 j, 2 j + 2)`` of row ``i``) and multiplied
with a weight ``w`` (R2, C2): ``L = sum(view(x) * w)``; SGD.
Plan: Mesh(tp=2), ``x`` is ``Shard(1)`` (``Shard(C)``) and ``w`` is ``Shard(R2)``. DTensor's
view rule returns each rank's local [4, 2] block unchanged, labelled ``Shard(0)`` of the (8, 2)
result (``views.dtensor_view``): rank r's rows ``4r .. 4r + 3`` are columns ``2r, 2r + 1`` of
every row of ``x``, not rows ``2r .. 2r + 1`` of ``x`` split in halves. ``full_tensor()`` differs
from ``x_full.view(8, 2)``.
Expected: NOT EQUIVALENT at ``grad:w`` (values: the gradient is the mislabelled view).
Smallest configuration (CASES2.md B69): 2 ranks, [4, 4], Shard(1), view(8, 2) labelled Shard(0).
"""

from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real
from spec_lang.views import dtensor_view, view

TP = Axis.TP
R, C, R2, C2 = Dim("R", 4), Dim("C", 4), Dim("R2", 8), Dim("C2", 2)

spec = Spec(params={"w": (R2, C2)}, data={"x": real(R, C)},
            forward=lambda p, d: ops.sum(view(d["x"], (R, C), (R2, C2)) * p["w"]),
            optimizer=SGD())


def forward(p, d):
    y = dtensor_view(d["x"], (R, C), (R2, C2), TP)          # BUG: local view, relabelled
    local = ops.sum(y * p["w"])                             # this rank's rows
    return Loss(backward=local, report=all_reduce(local, TP))


plan = Plan(mesh=Mesh(tp=2), placements={"x": {TP: Shard(C)}, "w": {TP: Shard(R2)}},
            forward=forward)
