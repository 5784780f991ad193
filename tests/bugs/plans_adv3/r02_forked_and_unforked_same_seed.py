"""PP2 pipeline, dropout per stage, stream forked on pp: the correct seeding (Megatron
``seed + 100 * pp_rank``): stage s draws stream (1234, pp=s) from offset 0. It was falsely
refuted before F1 was fixed. Expected: EQUIVALENT, certificate accepted."""
from fractions import Fraction

from spec_lang import SGD, Dim, Mesh, Plan, Spec, microbatches, ops, real
from spec_lang.pipeline import Pipeline, stage
from spec_lang.rng import RngStream
from spec_lang.schedules import one_f_one_b

B, H = Dim("B", 2), Dim("H", 2)
P = Fraction(1, 2)
stream_a = RngStream(1234, fork=("pp",))
stream_b = RngStream(1234)  # Megatron: seed + 100 * pp_rank


def l0(p, d, rng):
    return ops.dropout(d["x"] * p["w0"], P, rng, name="d0")


def l1(p, h, d, rng):
    return ops.sum(ops.dropout(h * p["w1"], P, rng, name="d1") * d["t"])


spec = Spec(params={"w0": (H,), "w1": (H,)}, data={"x": real(B, H), "t": real(B, H)},
            forward=lambda p, d: l1(p, l0(p, d, None), d, None), optimizer=SGD())


def s0(p, d, io):
    io.send(l0(p, d, stream_a))


def s1(p, d, io):
    return l1(p, io.recv(), d, stream_b)


pipe = Pipeline([stage(s0, ["w0"]), stage(s1, ["w1"])], schedule=one_f_one_b(2, 1))
plan = Plan(mesh=Mesh(pp=2), forward=pipe.forward, schedule=pipe, microbatches=microbatches(1, B))
