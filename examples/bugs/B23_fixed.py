"""B23 fixed: DeepSpeed #8475 / PR #8478, expert parallelism, FP32 gradient-clipping path.

Spec: two experts ``w_e`` (E=2, H) each apply to the tokens routed to them, ``y_{e,c} = x_{e,c} .
w_e``, loss ``L = sum_{e,c} y_{e,c}``; gradients clipped to global norm 1, so ``||g||^2 = D + E_0
+ E_1`` (no dense parameters here: D = 0).
Plan: Mesh(ep=2), expert e on rank e (Shard(E) over ep), its tokens already dispatched there.
The norm is ``nu = sqrt(D + AR_sum[EP](E_r))``: the library's ``global_grad_norm_sq`` sums the
squares of each gradient locally and all-reduces over exactly the axes its placement shards
(the experts: ep), counting replicated gradients once.
Expected verdict: EQUIVALENT.
"""

from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real
from spec_lang.plans import global_grad_norm_sq

EP = Axis.EP
E, C, H = Dim("E", 2), Dim("C", 2), Dim("H", 2)     # experts, tokens per expert, hidden


def routed_loss(p, d):
    """sum over experts e and their tokens c of x_{e,c} . w_e."""
    return ops.sum(ops.einsum(d["x"], p["experts"], out=(E, C)))


spec = Spec(params={"experts": (E, H)}, data={"x": real(E, C, H)},
            forward=routed_loss, optimizer=SGD(), clip_grad_norm=1)


def forward(p, d):
    local = routed_loss(p, d)                          # this rank's expert and tokens
    return Loss(backward=local, report=all_reduce(local, EP))


placements = {"experts": {EP: Shard(E)}, "x": {EP: Shard(E)}}
plan = Plan(mesh=Mesh(ep=2), placements=placements, forward=forward,
            grad_norm_sq=lambda grads: global_grad_norm_sq(grads, placements))
