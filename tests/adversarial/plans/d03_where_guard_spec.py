"""Adversarial attempt (rejected): see tests/adversarial/ATTEMPTS.md."""
from fractions import Fraction
from spec_lang import *
from spec_lang import ops
from spec_lang.muon import Muon
DP, TP = Axis.DP, Axis.TP

B, S, H = Dim("B", 4), Dim("S", 4), Dim("H", 2)
def seqmean(p, d, guard):
    n = ops.sum(d["m"], S); s = ops.sum(d["m"] * ops.sum(d["x"] * p["w"], H), S)
    has = -ops.maximum(-n, -1)                                 # 1 if the sequence has a token
    return ops.sum(ops.where(has, s / n, 0) if guard else s / n)
spec = Spec(params={"w": (H,)}, data={"m": mask(B, S), "x": real(B, S, H)},
            forward=lambda p, d: seqmean(p, d, True), optimizer=SGD())
plan = Plan(mesh=Mesh(dp=1), forward=lambda p, d: seqmean(p, d, False))
