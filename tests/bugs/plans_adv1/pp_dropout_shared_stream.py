"""PP2 pipeline, one micro-batch, one dropout per stage, both from one ``RngStream(1234)`` not
forked on pp (adversarial finding F1). Each stage process has its own generator starting at
offset 0, so stage 1's mask 'd1' is stage 0's mask 'd0'; the spec draws them independently.
Expected: NOT EQUIVALENT (per-stage generators: d0 and d1 share every draw, stream (seed 1234)
offsets 0..3 on pp=0 and on pp=1)."""
from fractions import Fraction

from spec_lang import SGD, Dim, Mesh, Plan, Spec, microbatches, ops, real
from spec_lang.pipeline import Pipeline, stage
from spec_lang.rng import RngStream
from spec_lang.schedules import one_f_one_b

B, H = Dim("B", 2), Dim("H", 2)
P = Fraction(1, 2)
stream = RngStream(1234)


def l0(p, d, rng):
    return ops.dropout(d["x"] * p["w0"], P, rng, name="d0")


def l1(p, h, d, rng):
    return ops.sum(ops.dropout(h * p["w1"], P, rng, name="d1") * d["t"])


spec = Spec(params={"w0": (H,), "w1": (H,)}, data={"x": real(B, H), "t": real(B, H)},
            forward=lambda p, d: l1(p, l0(p, d, None), d, None), optimizer=SGD())


def s0(p, d, io):
    io.send(l0(p, d, stream))


def s1(p, d, io):
    return l1(p, io.recv(), d, stream)


pipe = Pipeline([stage(s0, ["w0"]), stage(s1, ["w1"])], schedule=one_f_one_b(2, 1))
plan = Plan(mesh=Mesh(pp=2), forward=pipe.forward, schedule=pipe, microbatches=microbatches(1, B))
