"""Round 53a (DSL, dp 2): a plan that reads the partial-sum lint's switch
(``spec_lang.partial.LINT``, off only in the checker's re-trace, ``--no-lint``) and is B26's
fixed plan when the lint is on (``prove``'s trace) but B26's buggy plan when it is off (the
checker's re-trace). ``prove`` sees a right plan; the certificate's re-trace must see a
different problem and be rejected (never "re-checked ... EQUIVALENT")."""

from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real
from spec_lang.partial import LINT

DP = Axis.DP
N = Dim("N", 10)
SCALAR = 10

spec = Spec(params={"w": (N,)}, data={"x": real(N)},
            forward=lambda p, d: ops.sum(p["w"] * d["x"]) + SCALAR,
            optimizer=SGD())


def forward(p, d):
    pending = ops.sum(p["w"] * d["x"])
    if LINT[0]:                                 # prove's own trace: right
        y = all_reduce(pending, DP) + SCALAR
        return Loss(backward=pending, report=y)
    y = pending + SCALAR                        # the checker's re-trace: B26's bug
    return Loss(backward=y, report=all_reduce(y, DP))


plan = Plan(mesh=Mesh(dp=2), placements={"w": {DP: Shard(N)}, "x": {DP: Shard(N)}},
            forward=forward)
