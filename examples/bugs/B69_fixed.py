"""B69 fixed: PyTorch #179502, DTensor ``view`` across a sharded dim: redistribute, then view.

Spec: an activation ``x`` (R, C) = [4, 4] viewed row-major as ``(R2, C2)`` = (8, 2)
(``x.view(8, 2)``: row ``2 i + j`` is columns ``[2 j, 2 j + 2)`` of row ``i``) and multiplied
with a weight ``w`` (R2, C2): ``L = sum(view(x) * w)``; SGD.
Plan: Mesh(tp=2), ``x`` is ``Shard(1)`` (``Shard(C)``) and ``w`` is ``Shard(R2)``. The view
flattens a sharded inner dim, so the plan all-gathers ``x`` (``Replicate``), views the full
tensor and takes its ``Shard(R2)`` rows (``redistribute``), as the issue says the rule should
have required.
Expected: EQUIVALENT, with a certificate.
Smallest configuration (CASES2.md B69): 2 ranks, [4, 4], Shard(1), view(8, 2) labelled Shard(0).
"""

from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_gather, all_reduce, ops, real,
)
from spec_lang.dtensor import redistribute
from spec_lang.views import view

TP = Axis.TP
R, C, R2, C2 = Dim("R", 4), Dim("C", 4), Dim("R2", 8), Dim("C2", 2)

spec = Spec(params={"w": (R2, C2)}, data={"x": real(R, C)},
            forward=lambda p, d: ops.sum(view(d["x"], (R, C), (R2, C2)) * p["w"]),
            optimizer=SGD())


def forward(p, d):
    full = view(all_gather(d["x"], TP, C), (R, C), (R2, C2))
    y = redistribute(full, {TP: Shard(R2)})                 # this rank's rows of the view
    local = ops.sum(y * p["w"])                             # this rank's rows
    return Loss(backward=local, report=all_reduce(local, TP))


plan = Plan(mesh=Mesh(tp=2), placements={"x": {TP: Shard(C)}, "w": {TP: Shard(R2)}},
            forward=forward)
