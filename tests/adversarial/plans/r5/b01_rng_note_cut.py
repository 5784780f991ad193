"""Round 5, b01: a plan whose dropout draws are flagged by the rng check (a dropout 'extra' the
spec does not have, drawn from the layer's stream before the layer's own dropout, its value
multiplied by 0), with layer boundaries so that the prover cuts its goals. Before the phase
split the rng note kept every goal open (UNKNOWN: "never EQUIVALENT on it", docs/cli.md); the
checker's re-check rejects an EQUIVALENT certificate with such a note."""
from fractions import Fraction

from spec_lang import SGD, Dim, Mesh, Plan, Spec, ops, real
from spec_lang.rng import RngStream

P = Fraction(1, 10)
B, S, H, F = Dim("B", 2), Dim("S", 2), Dim("H", 2), Dim("F", 2)
LAYERS = 2


def _stack(p, x, drop):
    for i in range(LAYERS):
        x = ops.layer_boundary(x, f"layers.{i}")
        h = ops.silu(ops.einsum(x, p[f"l{i}.w1"], out=(B, S, F)))
        y = ops.einsum(h, p[f"l{i}.w2"], out=(B, S, H))
        x = x + drop(y, i)
    return ops.layer_boundary(x, f"layers.{LAYERS}")


def spec_loss(p, d):
    return ops.sum(_stack(p, d["x"], lambda y, i: ops.dropout(y, P, name=f"l{i}.hidden"))
                   * d["t"])


STREAM = RngStream(1234)


def _plan_drop(y, i):
    junk = ops.dropout(y, P, rng=STREAM, name=f"extra{i}")   # drawn, then discarded
    return ops.dropout(y, P, rng=STREAM, name=f"l{i}.hidden") + junk * 0


def plan_loss(p, d):
    return ops.sum(_stack(p, d["x"], _plan_drop) * d["t"])


params = {f"l{i}.{w}": dims for i in range(LAYERS) for w, dims in (("w1", (H, F)), ("w2", (F, H)))}
spec = Spec(params=params, data={"x": real(B, S, H), "t": real(B, S, H)}, forward=spec_loss,
            optimizer=SGD())
plan = Plan(mesh=Mesh(dp=1), placements={}, forward=plan_loss)
