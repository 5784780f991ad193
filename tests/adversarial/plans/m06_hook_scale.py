"""Adversarial attempt (rejected): see tests/adversarial/ATTEMPTS.md."""
from fractions import Fraction
from spec_lang import *
from spec_lang import ops
from spec_lang.muon import Muon
DP, TP = Axis.DP, Axis.TP

from spec_lang.hooks import scale_grad
H = Dim("H", 4); B = Dim("B", 2)
spec = Spec(params={"w": (H,)}, data={"x": real(B, H)}, forward=lambda p, d: ops.sum(p["w"] * d["x"]), optimizer=SGD())
plan = Plan(mesh=Mesh(dp=1), forward=lambda p, d: ops.sum(scale_grad(p["w"], Fraction(1, 2)) * d["x"]))
