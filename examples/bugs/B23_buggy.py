"""B23 buggy: DeepSpeed #8475 / PR #8478, expert parallelism, FP32 gradient-clipping path.

Spec: two experts ``w_e`` (E=2, H) each apply to the tokens routed to them, ``y_{e,c} = x_{e,c} .
w_e``, loss ``L = sum_{e,c} y_{e,c}``; gradients clipped to global norm 1 (PyTorch
``clip_grad_norm_``), so ``||g||^2 = D + E_0 + E_1`` (no dense parameters here: D = 0).
Plan: Mesh(ep=2), expert e on rank e (Shard(E) over ep), its tokens already dispatched there. Each
rank's expert gradient is complete locally. The norm, as in the buggy DeepSpeed path: each rank
takes the norm of all its local gradients, divides by the group size and all-reduces, so
``nu = (1/R) sum_r sqrt(D + E_r)`` -- an average of per-rank roots, right for replicated tensors
and wrong for expert tensors, which differ per rank.
Smallest configuration (CASES.md): ep=2, two experts one per rank, clipping active. With
``E_0 = 20, E_1 = 100``: nu = (sqrt(20) + 10)/2 = 7.236, the spec's sqrt(120) = 10.954.
Expected verdict: NOT EQUIVALENT; first diverging goal ``grad_norm`` (values differ; not a
constant factor), then the clipped update of ``experts``.
"""

from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real

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


def grad_norm_sq(grads):
    local_sq = None                                    # D + E_r: every local gradient
    for g in grads.values():
        s = ops.sum(g * g)
        local_sq = s if local_sq is None else local_sq + s
    nu = all_reduce(ops.sqrt(local_sq), EP, "avg")     # (1/R) sum_r sqrt(D + E_r)
    return nu * nu


plan = Plan(mesh=Mesh(ep=2),
            placements={"experts": {EP: Shard(E)}, "x": {EP: Shard(E)}},
            forward=forward, grad_norm_sq=grad_norm_sq)
