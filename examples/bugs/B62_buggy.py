"""B62 buggy: NeMo Automodel #3816 / PR #3817, the clip norm is not reduced over the EP axis for
TE experts.

Spec: a dense parameter ``d`` (D,) and expert parameters ``e`` (E,), a linear loss
``sum(d a) + sum(e b)``; gradients clipped at global norm ``c`` (on by default, max_norm 1.0 in
the report; 1/100 here so it is active), SGD.
Plan: Mesh(ep=2): the dense parameter is FSDP-sharded over both ranks (``Shard(D)``), one expert
per rank (``Shard(E)`` over ep). TE expert parameters are plain tensors, so the clip code never
adds their squared norm across ep: each rank clips with its own "global" norm
``nu_r = sqrt(D + E_r)``, and the dense parameter shared across the EP groups is clipped by
different factors on different ranks.
Expected: NOT EQUIVALENT at ``grad_norm`` (values differ per rank: the report's 40.2 vs 4.0 on
its CPU repro) and every clipped update.
Smallest configuration (CASES2.md B62): 2 ranks, ep = 2, one expert per rank plus one dense
parameter sharded over both.
"""

from fractions import Fraction

from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real

EP = Axis.EP
D, E = Dim("D", 2), Dim("E", 2)


spec = Spec(params={"d": (D,), "e": (E,)}, data={"a": real(D), "b": real(E)},
            forward=lambda p, x: ops.sum(p["d"] * x["a"]) + ops.sum(p["e"] * x["b"]),
            optimizer=SGD(lr=Fraction(1, 10)), clip_grad_norm=Fraction(1, 100))


def forward(p, x):
    local = ops.sum(p["d"] * x["a"]) + ops.sum(p["e"] * x["b"])
    return Loss(backward=local, report=all_reduce(local, EP))


def grad_norm_sq(g):
    dense = all_reduce(ops.sum(g["d"] * g["d"]), EP)         # FSDP shards: summed over ep
    experts = ops.sum(g["e"] * g["e"])                        # BUG: never reduced over ep
    return dense + experts


shard = {"d": {EP: Shard(D)}, "a": {EP: Shard(D)}, "e": {EP: Shard(E)}, "b": {EP: Shard(E)}}
plan = Plan(mesh=Mesh(ep=2), placements=shard, forward=forward, grad_norm_sq=grad_norm_sq)
