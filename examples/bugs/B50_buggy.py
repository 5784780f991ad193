"""B50 buggy: DeepSpeed #8437 (AutoTP + Muon) and Megatron-LM's ``muon_tp_mode="blockwise"``:
Muon orthogonalises each tensor-parallel shard separately.

Spec: one linear layer ``x W`` with ``W (H, F)`` (torch layout (out, in) = (F, H): a 4 x 2
matrix), squared error, Muon (Keller Jordan's reference: momentum 0.95 with Nesterov,
Newton-Schulz with (3.4445, -4.7750, 2.0315) and 5 steps on the *whole* update matrix, scale
``max(1, 4/2)^0.5``).
Plan: Mesh(tp=2), W column-parallel (``Shard(F)``: two 2 x 2 row blocks G_1, G_2). The optimizer
runs on the local shards with ``tp_mode="blockwise"``: ``[NS(G_1); NS(G_2)]`` instead of
``NS([G_1; G_2])`` (both the Frobenius normalisation and the Gram matrix differ), so the update
depends on tp.
Expected: NOT EQUIVALENT at the updated weight ``W`` (values differ; every gradient is right).
Smallest configuration (CASES2.md B50, derived): tp = 2, one 4 x 2 matrix split into two 2 x 2
row blocks.
"""

from spec_lang import Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real
from spec_lang.muon import Muon

TP = Axis.TP
B, H, F = Dim("B", 2), Dim("H", 2), Dim("F", 4)


def sq_err_sum(p, d):
    r = ops.einsum(d["x"], p["W"], out=(B, F)) - d["t"]
    return ops.sum(r * r)


spec = Spec(params={"W": (H, F)}, data={"x": real(B, H), "t": real(B, F)},
            forward=lambda p, d: sq_err_sum(p, d) / ops.dim_size(B), optimizer=Muon())


def forward(p, d):
    local = sq_err_sum(p, d) / ops.dim_size(B)        # this rank's output columns
    return Loss(backward=local, report=all_reduce(local, TP))


plan = Plan(mesh=Mesh(tp=2), placements={"W": {TP: Shard(F)}, "t": {TP: Shard(F)}},
            forward=forward, optimizer=Muon(tp_mode="blockwise"))   # BUG: NS per shard
