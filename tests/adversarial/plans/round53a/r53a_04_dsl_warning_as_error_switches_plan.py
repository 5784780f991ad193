"""Round 53a (DSL, dp 2): the same switch without reading ``LINT``: the plan turns
``PartialSumWarning`` into an exception and probes for it with B26's buggy expression. With the
lint on (``prove``'s trace) the probe raises and the plan is B26's fixed plan; with the lint off
(the checker's re-trace) nothing raises and the plan is B26's buggy one. The certificate's
re-trace must be rejected."""
import warnings

from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real

DP = Axis.DP
N = Dim("N", 10)
SCALAR = 10

spec = Spec(params={"w": (N,)}, data={"x": real(N)},
            forward=lambda p, d: ops.sum(p["w"] * d["x"]) + SCALAR,
            optimizer=SGD())


def forward(p, d):
    pending = ops.sum(p["w"] * d["x"])
    linted = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            all_reduce(pending + SCALAR, DP)    # the probe: linted iff the lint is on
        except Warning:
            linted = True
    if linted:                                  # prove's own trace: right
        y = all_reduce(pending, DP) + SCALAR
        return Loss(backward=pending, report=y)
    y = pending + SCALAR                        # the checker's re-trace: B26's bug
    return Loss(backward=y, report=all_reduce(y, DP))


plan = Plan(mesh=Mesh(dp=2), placements={"w": {DP: Shard(N)}, "x": {DP: Shard(N)}},
            forward=forward)
