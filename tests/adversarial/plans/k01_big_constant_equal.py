"""Adversarial round 2 (exact constants): a 3000-digit exact rational (the grammar allows 4000)."""
from fractions import Fraction
from spec_lang import *
from spec_lang import ops
DP, TP = Axis.DP, Axis.TP
B, H = Dim("B", 4), Dim("H", 2)
a = Fraction(10**2999 + 7, 3)
b = Fraction(3, 10**2999 + 7)          # a * b = 1
c = Fraction(10**2999 + 9, 7)
def loss(p, d, plan):
    y = ops.sum(d["x"] * p["w"]) / ops.dim_size(B)
    return y * a * c * b if plan else y * c
spec = Spec(params={"w": (H,)}, data={"x": real(B, H)}, forward=lambda p, d: loss(p, d, False), optimizer=SGD())
plan = Plan(mesh=Mesh(dp=1), forward=lambda p, d: loss(p, d, True))
