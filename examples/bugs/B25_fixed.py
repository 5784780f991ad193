"""B25 fixed: TransformerEngine (ROCm fork) PR #715, TP with a replicated (non-parallel) linear.

Spec: ``h = x A`` (A: (H, K), a plain linear), ``z = h W`` (W: (K, F)), loss ``L = sum(z^2)/2``;
gradients clipped to global norm 1/100 (active), ``||g||^2 = ||g_A||^2 + ||g_W||^2``.
Plan: Mesh(tp=2); A replicated, W column-parallel (Shard(F) over tp). The norm's multiplicity is
derived from the placements (``global_grad_norm_sq``): W's squares are all-reduced over tp (it
is Shard there), A's are counted once (Replicate), never from a hand-set attribute.
Expected verdict: EQUIVALENT.
"""

from fractions import Fraction

from spec_lang import (
    SGD, Axis, Dim, Mesh, Plan, Shard, Spec, copy_to_tp_region, ops, real, reduce_from_tp_region,
)
from spec_lang.plans import global_grad_norm_sq

TP = Axis.TP
B, H, K, F = Dim("B", 2), Dim("H", 2), Dim("K", 2), Dim("F", 4)


def loss_sum(p, d, enter=lambda h: h, leave=lambda s: s):
    h = ops.einsum(d["x"], p["A"], out=(B, K))                  # replicated linear
    z = ops.einsum(enter(h), p["W"], out=(B, F))                # column-parallel linear
    return leave(ops.sum(z * z)) / 2


spec = Spec(params={"A": (H, K), "W": (K, F)}, data={"x": real(B, H)},
            forward=loss_sum, optimizer=SGD(), clip_grad_norm=Fraction(1, 100))


def forward(p, d):
    return loss_sum(p, d, enter=copy_to_tp_region, leave=reduce_from_tp_region)


placements = {"W": {TP: Shard(F)}}
plan = Plan(mesh=Mesh(tp=2), placements=placements, forward=forward,
            grad_norm_sq=lambda grads: global_grad_norm_sq(grads, placements))
