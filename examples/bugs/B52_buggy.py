"""B52 buggy (a): NeMo Automodel PR #2995, the router detached from the main loss by a plain
all-gather of the routing probabilities under expert parallelism.

Spec: tokens x (T, H), a softmax router ``W_r (H, E)`` with top-1 routing, experts
``W_e (E, H, O)``: ``y_t = sum_e g[t, e] x_t W_e`` with ``g = softmax(x W_r) * topk``; the mean
squared error against targets; SGD. The router's gradient comes from the main loss through ``g``.
Plan: Mesh(ep=2), one expert per rank (``Shard(E)``). Each rank routes its block of the tokens
(Automodel's router runs on local tokens), all-gathers the gate weights over ep so that its
expert can weigh every token, and the expert outputs are summed over ep. The gather is
``dist.all_gather`` (no autograd): ``all_gather(stop_gradient(g_local))``.
Expected: NOT EQUIVALENT at ``grad:router``: 0.000 x spec (the main loss has no gradient path to
the router; a lineage failure); the experts' gradients are right.
Smallest configuration (CASES2.md B52): ep = 2, one MoE layer.
"""

from fractions import Fraction

from spec_lang import (
    SGD, Axis, Dim, Mesh, Plan, Shard, Spec, all_gather, all_reduce, gather_from_tp_region,
    ops, real, reduce_from_tp_region, scatter_to_tp_region,
)

EP = Axis.EP
T, H, E, O = Dim("T", 4), Dim("H", 2), Dim("E", 2), Dim("O", 2)


def gates(x, router):
    scores = ops.einsum(x, router, out=(x.dims[0], E))
    return ops.softmax(scores, E) * ops.topk_mask(scores, E, 1)


def sq_err_mean(y, t):
    r = y - t
    return ops.sum(r * r) / ops.dim_size(T)


def spec_loss(p, d):
    y = ops.einsum(gates(d["x"], p["router"]), d["x"], p["experts"], out=(T, O))
    return sq_err_mean(y, d["t"])


spec = Spec(params={"router": (H, E), "experts": (E, H, O)},
            data={"x": real(T, H), "t": real(T, O)}, forward=spec_loss,
            optimizer=SGD(lr=Fraction(1, 10)))


def gather_gates(g_local):
    return all_gather(ops.stop_gradient(g_local), EP, T)    # BUG: dist.all_gather, no autograd


def forward(p, d):
    x_local = scatter_to_tp_region(d["x"], T, EP)            # this rank's tokens (data)
    g = gather_gates(gates(x_local, p["router"]))            # (T, E): every token's gates
    g_mine = scatter_to_tp_region(g, E, EP)                  # this rank's expert column
    y = reduce_from_tp_region(ops.einsum(g_mine, d["x"], p["experts"], out=(T, O)), EP)
    return sq_err_mean(y, d["t"])


plan = Plan(mesh=Mesh(ep=2), placements={"experts": {EP: Shard(E)}}, forward=forward,
            reduce_grads={"router": lambda name, g: all_reduce(g, EP)})  # its tokens' share
