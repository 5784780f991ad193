"""B59 buggy (b): HF transformers PR #48205, expert parallelism: the router-score gradient
partials are never summed over EP.

Spec: tokens x (T, X), an input projection ``h = x W_in`` (everything upstream of the MoE
block), a softmax router ``W_r (H, E)`` with top-1 routing over E = 2 experts
``W_e (E, H, O)``: ``y_t = sum_e g[t, e] h_t W_e``; mean squared error; SGD.
Plan: Mesh(ep=2), one expert per rank (``Shard(E)``); every rank sees every token, computes the
router and its expert's output, and the outputs are summed over ep. The expert inputs enter
through ``copy_to_tp_region`` (their gradient is all-reduced). The router hook zeroes the
gradient of the non-local score slots (``scale_grad(g, own)`` with ``own`` the one-hot of this
rank's expert), so each rank's gradient w.r.t. the routing scores covers only its local expert,
and nothing sums these partials: ``dL/dh`` through the router is ``sum_{local e}`` instead of
``sum_e``, for the router and everything upstream.
Expected: NOT EQUIVALENT at ``grad:router`` and ``grad:W_in`` (values differ per rank); the
experts' gradients are right.
Smallest configuration (CASES2.md B59(b)): ep = 2, one MoE layer, top-1 routing. (B59(a),
uninitialised memory, is not a real-arithmetic case.)
"""

from fractions import Fraction

from spec_lang import (
    SGD, Axis, Dim, Mesh, Plan, Shard, Spec, copy_to_tp_region, ops, real,
    reduce_from_tp_region, scatter_to_tp_region,
)
from spec_lang.hooks import scale_grad

EP = Axis.EP
T, X, H, E, O = Dim("T", 2), Dim("X", 2), Dim("H", 2), Dim("E", 2), Dim("O", 2)


def router_gates(h, router):
    scores = ops.einsum(h, router, out=(T, E))
    return ops.softmax(scores, E) * ops.topk_mask(scores, E, 1)


def sq_err_mean(y, t):
    r = y - t
    return ops.sum(r * r) / ops.dim_size(T)


def spec_loss(p, d):
    h = ops.einsum(d["x"], p["W_in"], out=(T, H))
    y = ops.einsum(router_gates(h, p["router"]), h, p["experts"], out=(T, O))
    return sq_err_mean(y, d["t"])


spec = Spec(params={"W_in": (X, H), "router": (H, E), "experts": (E, H, O)},
            data={"x": real(T, X), "t": real(T, O)}, forward=spec_loss,
            optimizer=SGD(lr=Fraction(1, 10)))


def forward(p, d):
    h = ops.einsum(d["x"], p["W_in"], out=(T, H))
    g = router_gates(h, p["router"])
    own = ops.one_hot(ops.rank(EP), E)                        # this rank's expert slot
    g = scale_grad(g, own)                                    # BUG: non-local slots zeroed, never summed
    y_mine = ops.einsum(scatter_to_tp_region(g, E, EP), copy_to_tp_region(h, EP),
                        p["experts"], out=(T, O))
    return sq_err_mean(reduce_from_tp_region(y_mine, EP), d["t"])


plan = Plan(mesh=Mesh(ep=2), placements={"experts": {EP: Shard(E)}}, forward=forward)
