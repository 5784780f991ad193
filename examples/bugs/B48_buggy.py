"""B48 buggy: DeepSpeed #7807, Muon under ZeRO-1/2 with reduce-scatter orthogonalises a partly
reduced matrix.

Spec: one linear layer with ``W (F, H)`` (torch layout (out, in): 4 x 2), the mean squared error
over the global batch, Muon (reference constants: momentum 0.95 Nesterov, 5 Newton-Schulz steps
with (3.4445, -4.7750, 2.0315), scale ``max(1, 4/2)^0.5``).
Plan: Mesh(dp=2), batch ``Shard(B)``; ZeRO with one flat bucket ``[W]`` whose partition boundary
cuts W (rank 0 owns rows 0-1, rank 1 rows 2-3: ``FlatBuffer``, ``optimizer_owners``).
``get_flat_partition`` views each rank's gradient buffer as the full 2-D matrix, runs
``muon_update`` (momentum + NS) on it and keeps the rank's slice. With ``reduce_scatter=true``
the buffer holds the reduced gradient only on the rank's own rows and its local, unreduced
gradient elsewhere (``FlatBuffer.after_reduce_scatter``): rank r computes
``slice_r(NS(G~_r))`` with ``G~_r = [g_bar on slice_r; g_r elsewhere]``.
Expected: NOT EQUIVALENT at the updated weight ``W`` (values differ; ranks apply mutually
inconsistent updates). The gradient goal (each owner's reduced rows) is right.
Smallest configuration (CASES2.md B48): 2 ranks, ZeRO-1, one 2-D weight whose flattened
gradient straddles the rank boundary.
"""

from spec_lang import Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real
from spec_lang.muon import Muon
from spec_lang.plans.sharded_dp import FlatBuffer

DP = Axis.DP
B, F, H = Dim("B", 4), Dim("F", 4), Dim("H", 2)
MUON = Muon(matrix={"W": ("F", "H")})


def sq_err_sum(p, d):
    r = ops.einsum(d["x"], p["W"], out=(B, F)) - d["t"]
    return ops.sum(r * r)


spec = Spec(params={"W": (F, H)}, data={"x": real(B, H), "t": real(B, F)},
            forward=lambda p, d: sq_err_sum(p, d) / ops.dim_size(B), optimizer=MUON)

bucket = FlatBuffer(spec.params, DP, 2)        # W straddles the two ranks' partitions


def forward(p, d):
    local = sq_err_sum(p, d) / ops.dim_size(B)      # this rank's addend of the mean
    return Loss(backward=local, report=all_reduce(local, DP))


batch = {DP: Shard(B)}
plan = Plan(mesh=Mesh(dp=2), placements={"x": batch, "t": batch}, forward=forward,
            reduce_grads=lambda name, g: bucket.after_reduce_scatter(name, g, op="sum"),  # BUG
            optimizer_owners={"W": bucket.ownership("W")})
