"""B25 buggy: TransformerEngine (ROCm fork) PR #715, TP with a replicated (non-parallel) linear.

Spec: ``h = x A`` (A: (H, K), a plain linear), ``z = h W`` (W: (K, F)), loss ``L = sum(z^2)/2``;
gradients clipped to global norm 1/100 (active), ``||g||^2 = ||g_A||^2 + ||g_W||^2``, every
element counted once.
Plan: Mesh(tp=2); A replicated, W column-parallel (Shard(F) over tp), ``h`` enters the TP region
through ``copy_to_tp_region`` and the loss's partial sum leaves it through
``reduce_from_tp_region``. The gradients are right. The norm: the replicated A carried the
"tensor-parallel" attribute, so the norm code all-reduced *every* local squared norm over tp:
``nu^2 = ||g_W||^2 + tp * ||g_A||^2``, ``nu / ||g|| = sqrt(1 + (tp - 1) f)`` with f A's share.
Smallest configuration (CASES.md): tp=2, one column-parallel and one replicated linear, clipping
active; with f = 1/2, nu = sqrt(1.5) ||g||.
Expected verdict: NOT EQUIVALENT; first diverging goal ``grad_norm`` (values differ; the factor
depends on f), then the clipped updates of A and W.
"""

from fractions import Fraction

from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, copy_to_tp_region, ops, real,
    reduce_from_tp_region,
)

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


TENSOR_PARALLEL = ("A", "W")     # the buggy attribute: A is marked tensor-parallel too


def grad_norm_sq(grads):
    total = None
    for name, g in grads.items():
        s = ops.sum(g * g)
        if name in TENSOR_PARALLEL:
            s = all_reduce(s, TP)                               # counted on every tp rank
        total = s if total is None else total + s
    return total


plan = Plan(mesh=Mesh(tp=2), placements={"W": {TP: Shard(F)}}, forward=forward,
            grad_norm_sq=grad_norm_sq)
