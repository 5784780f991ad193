"""B68 fixed: HF transformers PR #48689, expert parallelism (``batched_mm``): the routing weights
of sentinel slots are masked.

Spec: tokens x (T, H), a softmax router with top-1 routing over E = 2 experts ``W_e (E, H, O)``:
the slot weight ``w_t = sum_e p[t, e] m[t, e]`` (the top-1 probability) and
``y_t = w_t sum_e m[t, e] x_t W_e``; mean squared error; SGD. The loss is exactly the same with
or without the bug.
Plan: Mesh(ep=2), one expert per rank (``Shard(E)``), every rank sees every token; the slot
weights enter through an identity-forward / all-reduce-backward function (B59's fix) and the
experts' outputs are summed over ep. A slot whose expert lives on the other rank is kept
locally as a sentinel; PR #48689 masks the routing weight of sentinel slots (the weight is
multiplied by "the slot's expert is here"), so neither the output nor the gradient sees the
sentinel row.
Expected: EQUIVALENT, with a certificate.
Smallest configuration (CASES2.md B68): ep = 2, one MoE layer, top-1.
"""

from fractions import Fraction

from spec_lang import (
    SGD, Axis, Dim, Mesh, Plan, Shard, Spec, copy_to_tp_region, ops, real,
    reduce_from_tp_region, scatter_to_tp_region,
)

EP = Axis.EP
T, H, E, O = Dim("T", 2), Dim("H", 2), Dim("E", 2), Dim("O", 2)


def slot_weights(x, router):
    scores = ops.einsum(x, router, out=(T, E))
    m = ops.topk_mask(scores, E, 1)
    return ops.sum(ops.softmax(scores, E) * m, E), m          # (T,): the top-1 weight


def sq_err_mean(y, t):
    r = y - t
    return ops.sum(r * r) / ops.dim_size(T)


def spec_loss(p, d):
    w, m = slot_weights(d["x"], p["router"])
    o = ops.einsum(d["x"], p["experts"], out=(T, E, O))
    return sq_err_mean(ops.einsum(w, m, o, out=(T, O)), d["t"])


spec = Spec(params={"router": (H, E), "experts": (E, H, O)},
            data={"x": real(T, H), "t": real(T, O), "sentinel": real(T, O)},
            forward=spec_loss, optimizer=SGD(lr=Fraction(1, 10)))


def forward(p, d):
    w, m = slot_weights(d["x"], p["router"])
    w = copy_to_tp_region(w, EP)                                # all-reduce in backward
    m_mine = scatter_to_tp_region(m, E, EP)                     # is the slot's expert here?
    o_mine = ops.einsum(d["x"], p["experts"], out=(T, E, O))     # this rank's expert, every token
    y = ops.einsum(w, m_mine, o_mine, out=(T, O))               # masked weights only
    return sq_err_mean(reduce_from_tp_region(y, EP), d["t"])


plan = Plan(mesh=Mesh(ep=2), placements={"experts": {EP: Shard(E)}}, forward=forward)
