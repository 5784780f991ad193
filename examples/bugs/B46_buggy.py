"""B46 buggy: Megatron-LM #5974 / PR #5976, Megatron-FSDP's optimizer pre-initialisation step.

Spec: one step of a freshly built Adam (PyTorch's lazy state: step 0, exp_avg = exp_avg_sq = 0),
so the update is Adam_1(g; 0, 0) with bias corrections 1 - b1 and 1 - b2: ``lr * sign(g)`` up to
eps. The counter it leaves is ``step:w = 1``.
Plan: ``fully_shard_optimizer`` materialises the optimizer state for DCP loading by running one
synthetic ``optimizer.step()`` with zero gradients (``InitStep()``, plan data: initialisation
code is part of the plan). That step advances the counter, so the first real update runs at
t = 2: ``lr (g/(1+b1)) / sqrt(g^2/(1+b2))`` = ``lr sign(g) sqrt(1+b2)/(1+b1)`` ~ 0.744 lr
(the ~1.34x smaller first step of #5974).
Expected: NOT EQUIVALENT: the first diverging goal is the counter ``step:w`` (2.000 x spec),
and the updated weight ``w`` differs (update ratio sqrt(1.999)/1.9 = 0.7441 up to eps).
Smallest configuration (CASES2.md B46): one rank, one parameter, Adam, one step.
"""

from fractions import Fraction

from spec_lang import Dim, Mesh, Plan, Spec, ops, real
from spec_lang.optim import Adam, InitStep

B, H, O = Dim("B", 2), Dim("H", 2), Dim("O", 2)


def loss(p, d):
    """Squared error of one linear layer, summed: (B, H) @ (H, O) against targets (B, O)."""
    r = ops.einsum(d["x"], p["w"], out=(B, O)) - d["t"]
    return ops.sum(r * r)


adam = Adam(lr=Fraction(1, 1000), betas=(Fraction(9, 10), Fraction(999, 1000)),
            eps=Fraction(1, 10**8), fresh=True)
spec = Spec(params={"w": (H, O)}, data={"x": real(B, H), "t": real(B, O)}, forward=loss,
            optimizer=adam)

plan = Plan(mesh=Mesh(dp=1), forward=loss,
            optimizer_init=[InitStep(note="fully_shard_optimizer: optimizer.step() with zero "
                                          "gradients to materialise the state (BUG: live lr, "
                                          "counter advanced)")])
