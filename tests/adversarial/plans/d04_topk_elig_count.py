"""Adversarial attempt (rejected): see tests/adversarial/ATTEMPTS.md."""
from fractions import Fraction
from spec_lang import *
from spec_lang import ops
from spec_lang.muon import Muon
DP, TP = Axis.DP, Axis.TP

T, E, H = Dim("T", 4), Dim("E", 4), Dim("H", 2)
def fwd(p, d, cancel):
    el = d["el"]; tk = ops.topk_mask(d["s"], E, 1, eligible=el)  # no eligible expert: 0 row
    n = ops.sum(tk, E)
    y = ops.sum(tk * d["s"], E)
    return ops.sum(p["w"] * ops.sum(y / n * n if cancel else y, T))
spec = Spec(params={"w": (H,)}, data={"s": real(T, E), "el": mask(T, E)},
            forward=lambda p, d: fwd(p, d, False), optimizer=SGD())
plan = Plan(mesh=Mesh(dp=1), forward=lambda p, d: fwd(p, d, True))
