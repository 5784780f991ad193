"""B52b buggy (b): NeMo Automodel PR #2995, experts that receive no token get ``grad=None`` and
AdamW skips them.

Spec: as B52 (tokens x (T, H), softmax router with top-1 routing over E = 4 experts, experts
``W_e (E, H, O)``, mean squared error), with AdamW (weight decay 0.1, moments from earlier
steps as inputs). An expert no token is routed to has gradient 0, and AdamW still steps it:
``m <- b1 m``, ``v <- b2 v``, ``p <- p (1 - lr wd) - lr m_hat / (sqrt(v_hat) + eps)``.
Plan: Mesh(ep=2), two experts per rank (``Shard(E)``), B52's fixed routing (autograd-aware
gather). When no token reaches a local TE expert its weight has ``grad = None`` (the dummy
computation touches only another weight): ``reduce_grads`` returns
``grad_or_none(g, present)`` with ``present = min(1, tokens routed to the expert)``, and
``torch.optim.AdamW`` skips the parameter entirely where it is absent.
Expected: NOT EQUIVALENT: the optimizer state ``exp_avg:experts`` (and the weight) of an expert
without tokens differs (spec ``b1 m``, plan ``m``); every gradient goal is right (None reads as
0 there: treating None as zero would hide the bug).
Smallest configuration (CASES2.md B52): ep = 2, one MoE layer, a batch that routes no token to
some expert (2 tokens, 4 experts, top-1: always).
"""

from fractions import Fraction

from spec_lang import (
    AdamW, Axis, Dim, Mesh, Plan, Shard, Spec, all_gather, all_reduce, gather_from_tp_region,
    ops, real, reduce_from_tp_region, scatter_to_tp_region,
)
from spec_lang.optim import grad_or_none

EP = Axis.EP
T, H, E, O = Dim("T", 2), Dim("H", 2), Dim("E", 4), Dim("O", 2)
ADAMW = AdamW(lr=Fraction(1, 100), weight_decay=Fraction(1, 10))


def routing(x, router):
    scores = ops.einsum(x, router, out=(x.dims[0], E))
    top = ops.topk_mask(scores, E, 1)
    return ops.softmax(scores, E) * top, top


def sq_err_mean(y, t):
    r = y - t
    return ops.sum(r * r) / ops.dim_size(T)


def spec_loss(p, d):
    g, _ = routing(d["x"], p["router"])
    return sq_err_mean(ops.einsum(g, d["x"], p["experts"], out=(T, O)), d["t"])


spec = Spec(params={"router": (H, E), "experts": (E, H, O)},
            data={"x": real(T, H), "t": real(T, O)}, forward=spec_loss, optimizer=ADAMW)

present = {}            # filled by the forward: which local experts got a token this step


def forward(p, d):
    x_local = scatter_to_tp_region(d["x"], T, EP)            # this rank's tokens (data)
    g_local, top_local = routing(x_local, p["router"])
    g = gather_from_tp_region(g_local, T, EP)                # (T, E), autograd-aware
    count = ops.sum(all_gather(top_local, EP, T), T)         # tokens routed to each expert
    present["experts"] = scatter_to_tp_region(-ops.maximum(-count, -1), E, EP)
    y = reduce_from_tp_region(
        ops.einsum(scatter_to_tp_region(g, E, EP), d["x"], p["experts"], out=(T, O)), EP)
    return sq_err_mean(y, d["t"])


def reduce_grads(name, g):
    if name == "router":
        return all_reduce(g, EP)                             # its tokens' share
    return grad_or_none(g, present[name])                   # BUG: None for experts without tokens


plan = Plan(mesh=Mesh(ep=2), placements={"experts": {EP: Shard(E)}}, forward=forward,
            reduce_grads=reduce_grads)
