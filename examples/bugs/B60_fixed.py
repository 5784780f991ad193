"""B60 fixed: Megatron-LM PR #6470, expert gradient statistics de-duplicated with the expert TP
group.

Spec: a dense parameter ``d`` (D,) and expert parameters ``e`` (E,) (one per expert), a linear
loss ``sum(d a) + sum(e b)``; gradients clipped at global norm ``c``
(``clip_grad_norm_``), SGD. With one dense and one expert scalar per rank and all gradients 1,
``||g|| = sqrt(1 + 2) = sqrt(3)``.
Plan: the same two ranks are a TP2 group for dense parameters (``d`` replicated: every rank
holds the same dense gradient, counted once) and an EP2 group for experts (``Shard(E)`` over
ep, ETP1). The fix passes both the dense and the expert TP group into the norm: dense gradients
are counted once, expert shards are de-duplicated with the expert TP group (size 1: every
expert shard counts) and summed over ep: ``nu^2 = D + E_0 + E_1``.
Expected: EQUIVALENT, with a certificate.
Smallest configuration (CASES2.md B60): 2 ranks, TP2 / EP2 / ETP1 / DP1.
"""

from fractions import Fraction

from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real

EP = Axis.EP                    # the two ranks: the dense TP group and the EP group at once
D, E = Dim("D", 1), Dim("E", 2)


spec = Spec(params={"d": (D,), "e": (E,)}, data={"a": real(D), "b": real(E)},
            forward=lambda p, x: ops.sum(p["d"] * x["a"]) + ops.sum(p["e"] * x["b"]),
            optimizer=SGD(lr=Fraction(1, 10)), clip_grad_norm=Fraction(1, 100))


def forward(p, x):
    local = ops.sum(p["d"] * x["a"]) / ops.axis_size(EP) + ops.sum(p["e"] * x["b"])
    return Loss(backward=local, report=all_reduce(local, EP))


def grad_norm_sq(g):
    dense = ops.sum(g["d"] * g["d"])                          # replicated: counted once
    experts = all_reduce(ops.sum(g["e"] * g["e"]), EP)       # every expert shard, once
    return dense + experts


plan = Plan(mesh=Mesh(ep=2), placements={"e": {EP: Shard(E)}, "b": {EP: Shard(E)}},
            forward=forward, reduce_grads={"d": lambda name, g: all_reduce(g, EP)},
            grad_norm_sq=grad_norm_sq)
