"""B73 buggy: PyTorch PR #165962, DTensor max / min / norm on a Partial(sum) input computed
before the reduction.

Spec: a parameter ``w`` (N,) and a vector ``v`` (N,); the loss ``sum(w v)`` plus the logged
statistic ``max(v)`` (a stop-gradient term of the step's output, as a max-activation or
max-logit metric folded into the reported value); SGD.
Plan: Mesh(tp=2), ``v`` is ``Partial(sum)`` over tp (each rank holds an addend, e.g. a
row-parallel output). DTensor's reduction strategy treated ``max`` as linear in a Partial
input and delayed the redistribution: it ran on each rank's addend and the partial results
were then combined with the pending sum: ``sum_r max(v_r)`` instead of ``max(sum_r v_r)``.
Addends ``[1, 3]`` and ``[2, 0]``: spec ``max = 3``, plan ``3 + 2 = 5``.
Expected: NOT EQUIVALENT at ``loss`` (values); the gradient of ``w`` is right.
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
    stat = ops.stop_gradient(ops.max(d["v"], N))             # BUG: max of this rank's addend
    return Loss(backward=linear, report=all_reduce(linear + stat, TP))


plan = Plan(mesh=Mesh(tp=2), placements={"v": {TP: Partial("sum")}}, forward=forward,
            reduce_grads=lambda name, g: all_reduce(g, TP))
