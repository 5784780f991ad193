"""Finding 4 (issue 10 family 7, false NOT EQUIVALENT): a plan equal to its spec at the real sizes.

The plan multiplies the loss by ``cnt(S, T) / cnt(S2, T2) * 1025/4098`` with ``cnt`` the number of
ones of a causal mask: ``(2048 * 2049 / 2) / (1024 * 1025 / 2) * 1025 / 4098 = 1`` exactly at the
real sizes (|S| = |T| = 2048, |S2| = |T2| = 1024), so every goal is the spec's. The literal
1025/4098 = (|S2| + 1) / (2 (|S| + 1)) is not a product of sizes or causal counts, so Rule L lets
the refuter report a divergence at S = 6, S2 = 3 (factor 7/8), and the checker accepts it.
"""
from fractions import Fraction

from spec_lang import SGD, Dim, Mesh, Plan, Spec, ops, real

S, T, H = Dim("S", 2048), Dim("T", 2048), Dim("H", 512)
S2, T2 = Dim("S2", 1024), Dim("T2", 1024)


def cnt(a, b):
    return ops.sum(ops.causal_mask(a, b))


spec = Spec(params={"w": (H,)}, data={"x": real(S, H)},
            forward=lambda p, d: ops.sum(p["w"] * d["x"]), optimizer=SGD())
plan = Plan(mesh=Mesh(dp=1),
            forward=lambda p, d: ops.sum(p["w"] * d["x"]) * cnt(S, T) / cnt(S2, T2)
            * Fraction(1025, 4098))
