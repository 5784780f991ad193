"""B42 fixed: Megatron-LM #7452 finding 10 / PR #7481, the in-place TP/EP all-reduce overwrites the
router's local token count (per-token loss mode).

Spec: tokens x (T, H), a linear main loss ``L_main = sum_t (x_t W_o - y_t)^2 / N`` and one MoE
router ``W_r (H, E)`` with top-k routing and the load-balancing loss
``A = (E/k) sum_e (c_e / N) (P_e / N)``, ``c_e`` the routing count of expert ``e`` (no gradient),
``P_e = sum_t p[t, e]`` the summed router probabilities, ``N = |T|``; ``L = L_main + alpha A``.
Plan: Mesh(ep=2), tokens ``Shard(T)`` over ep. Megatron's per-token mode: each rank computes its
aux loss with the global counts and its local mean probabilities ``P_loc / n_local``, and
pre-multiplies it by its local token count ``n_local`` to cancel the later division by the
global token count. PR #7481: the local count is computed before the in-place all-reduce of
the counts buffer, so the pre-multiplier is this rank's own ``n_local`` and cancels the local
mean's divisor.
Expected: EQUIVALENT, with a certificate.
Smallest configuration (CASES2.md B42): 2 ranks, one MoE router, per-token loss.
"""

from fractions import Fraction

from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real,
)

EP = Axis.EP
T, H, E, O = Dim("T", 4), Dim("H", 2), Dim("E", 2), Dim("O", 2)
K_TOP = 1
ALPHA = Fraction(1, 10)


def main_sum(p, d):
    r = ops.einsum(d["x"], p["W_o"], out=(T, O)) - d["y"]
    return ops.sum(r * r)


def routing(p, d):
    scores = ops.einsum(d["x"], p["router"], out=(T, E))
    return ops.softmax(scores, E), ops.topk_mask(scores, E, K_TOP)


def spec_loss(p, d):
    n = ops.dim_size(T)
    probs, m = routing(p, d)
    c = ops.stop_gradient(ops.sum(m, T))                       # (E,) routing counts
    aux = ops.sum(c * ops.sum(probs, T)) * ops.dim_size(E) / (K_TOP * n * n)
    return main_sum(p, d) / n + ALPHA * aux


spec = Spec(params={"W_o": (H, O), "router": (H, E)},
            data={"x": real(T, H), "y": real(T, O)}, forward=spec_loss, optimizer=SGD())


def tokens_per_expert_and_token_count(m):
    """(tokens per expert, local token count) of this rank's routing, from one buffer that is
    all-reduced in place over the group (the global counts are needed for ``f_e``)."""
    local = ops.stop_gradient(ops.sum(m, T))                   # (E,) this rank's counts
    n_local = ops.sum(local) / K_TOP                           # read before the reduction
    reduced = all_reduce(local, EP)                            # the in-place all-reduce
    return reduced, n_local


def forward(p, d):
    n = ops.dim_size(T)                                        # global token count
    probs, m = routing(p, d)
    counts, n_local = tokens_per_expert_and_token_count(m)
    n_mean = ops.stop_gradient(ops.sum(ops.sum(m, T))) / K_TOP   # the local mean's divisor
    aux = ops.sum(counts * ops.sum(probs, T) / n_mean) * ops.dim_size(E) / (K_TOP * n)
    seed = main_sum(p, d) / n + ALPHA * n_local * aux / n      # per-token: x n_local, / N
    return Loss(backward=seed, report=all_reduce(seed, EP))


tokens = {EP: Shard(T)}
plan = Plan(mesh=Mesh(ep=2), placements={"x": tokens, "y": tokens}, forward=forward,
            reduce_grads=lambda name, g: all_reduce(g, EP))
