"""Adversarial attempt (rejected): see tests/adversarial/ATTEMPTS.md."""
from fractions import Fraction
from spec_lang import *
from spec_lang import ops
from spec_lang.muon import Muon
DP, TP = Axis.DP, Axis.TP

H, F, B = Dim("H", 4), Dim("F", 4), Dim("B", 2)
spec = Spec(params={"w": (H, F)}, data={"x": real(B, H)}, forward=lambda p, d: ops.sum(ops.einsum(d["x"], p["w"], out=(B, F))), optimizer=SGD())
plan = Plan(mesh=Mesh(dp=2), forward=lambda p, d: ops.sum(ops.einsum(d["x"], p["w"], out=(B, F))),
            optimizer_owners={"w": Ownership(DP, H, [0, 1, 1, None])})
