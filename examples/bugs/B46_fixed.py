"""B46 fixed: Megatron-LM #5974 / PR #5976, Megatron-FSDP's optimizer pre-initialisation step.

Spec: as B46_buggy.py: one step of a freshly built Adam, Adam_1(g; 0, 0); counter 1 after it.
Plan: the synthetic ``optimizer.step()`` that materialises the state is made inert, as PR #5976
does: learning rate and weight decay set to 0 for that step, then every per-parameter ``step``
reset to 0 (``InitStep(lr=0, weight_decay=0, reset_step=True)``). The state it leaves is
exp_avg = exp_avg_sq = 0 and step 0, so the real update is Adam_1.
Expected: EQUIVALENT, with a certificate.
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
            optimizer_init=[InitStep(lr=0, weight_decay=0, reset_step=True,
                                     note="PR #5976: the materialising step is inert and the "
                                          "counter is reset")])
