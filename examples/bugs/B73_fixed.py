"""B73 fixed: PyTorch PR #165962, DTensor max / min / norm on a Partial(sum) input: Partial ->
Replicate first.

Spec: a parameter ``w`` (N,) and a vector ``v`` (N,); the loss ``sum(w v)`` plus the logged
statistic ``max(v)`` (a stop-gradient term of the step's output, as a max-activation or
max-logit metric folded into the reported value); SGD.
Plan: Mesh(tp=2), ``v`` is ``Partial(sum)`` over tp (each rank holds an addend, e.g. a
row-parallel output). The fix marks the reduction non-linear for a Partial input with a
different reduce op, forcing Partial -> Replicate (an all-reduce) before the max.
Expected: EQUIVALENT, with a certificate.
Smallest configuration (CASES2.md B73): 2 ranks, a 2-element Partial vector.
"""

from spec_lang import SGD, Axis, Dim, Loss, Mesh, Partial, Plan, Spec, all_reduce, ops, real

TP = Axis.TP
N = Dim("N", 2)

spec = Spec(params={"w": (N,)}, data={"v": real(N)},
            forward=lambda p, d: ops.sum(p["w"] * d["v"]) + ops.stop_gradient(ops.max(d["v"], N)),
            optimizer=SGD())


def forward(p, d):
    linear = ops.sum(p["w"] * d["v"])                        # Partial: summed by the reduction
    stat = ops.stop_gradient(ops.max(all_reduce(d["v"], TP), N))    # reduce first
    return Loss(backward=linear, report=all_reduce(linear, TP) + stat)


plan = Plan(mesh=Mesh(tp=2), placements={"v": {TP: Partial("sum")}}, forward=forward,
            reduce_grads=lambda name, g: all_reduce(g, TP))
