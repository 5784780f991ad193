"""Autodiff through an elementwise broadcast whose adjoint is constant along the broadcast dim.

``ADD(x(V), NEG(s()))`` under ``mean_V`` / ``sum_V``: the adjoint of the ADD lacks ``V`` (it is
constant along it), and ``s`` lacks ``V`` too, so d loss / d s is the adjoint times ``|V|``
(the rank's count of ``V`` when ``V`` is sharded). Checked against central finite differences of
the evaluated loss, and on a plan whose ``V`` is Shard(V) over tp.
"""

from __future__ import annotations

import numpy as np
import pytest

from proofs.prover import prove
from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, build_problem, ops, real,
)
from spec_lang.evaluate import evaluate
from spec_lang.iteration import trace_spec
from spec_lang.term import Binding

V, B = Dim("V", 4), Dim("B", 3)

CASES = {
    "mean(x - sum x)": lambda p, d: ops.mean(p["x"] - ops.sum(p["x"], V), V),
    "sum(x - s)": lambda p, d: ops.sum(p["x"] - p["s"], V),
    "mean(x + b) over B, V": lambda p, d: ops.mean(p["y"] + p["x"]),
    "log_softmax mean": lambda p, d: ops.mean(ops.log_softmax(p["y"], V)),
    "where(m, x, s)": lambda p, d: ops.sum(ops.where(d["m"], p["y"], p["s"]) * d["t"]),
    "label smoothing": lambda p, d: ops.sum(ops.cross_entropy_per_token(
        p["y"], d["l"], V, label_smoothing=ops.const(1) / 5)),
}


def _spec(f):
    from spec_lang import index, mask
    return Spec(params={"x": (V,), "s": (), "y": (B, V)},
                data={"m": mask(B, V), "t": real(B, V), "l": index(B, range=V)},
                forward=f, optimizer=SGD())


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradient_matches_finite_differences(name):
    it = trace_spec(_spec(CASES[name]))
    bind = Binding({"V": 4, "B": 3})
    rng = np.random.default_rng(2)
    inputs = {"x": rng.standard_normal(4), "s": np.array(rng.standard_normal()),
              "y": rng.standard_normal((3, 4)), "m": (rng.uniform(size=(3, 4)) < .5) * 1.,
              "t": rng.standard_normal((3, 4)), "l": rng.integers(0, 4, 3) * 1.}

    def loss(inp):
        return float(np.asarray(evaluate([it.outputs["loss"]], bind, inp)[
            it.outputs["loss"]].data))

    for p in ("x", "s", "y"):
        g = it.outputs[f"grad:{p}"]
        got = np.asarray(evaluate([g], bind, inputs)[g].transpose_to(
            tuple(d.name for d in g.dims) if g.dims else ()))
        want = np.zeros_like(inputs[p])
        for i in np.ndindex(*inputs[p].shape):
            hi, lo = dict(inputs), dict(inputs)
            hi[p], lo[p] = inputs[p].copy(), inputs[p].copy()
            hi[p][i] += 1e-6
            lo[p][i] -= 1e-6
            want[i] = (loss(hi) - loss(lo)) / 2e-6
        np.testing.assert_allclose(np.broadcast_to(got, want.shape), want, atol=1e-6,
                                   err_msg=f"{name}: grad:{p}")


@pytest.mark.parametrize("tp", [2, 4])
def test_sharded_broadcast_counts_the_local_block(tp):
    # loss = sum_V (x - s): d/ds = -|V|; on a rank with V[tp], -|V|/|tp|, summed over tp
    Vd = Dim("V", 4 * tp)
    spec = Spec(params={"x": (Vd,), "s": ()}, data={"t": real(Vd)},
                forward=lambda p, d: ops.sum((p["x"] - p["s"]) * d["t"] + p["x"] - p["s"]),
                optimizer=SGD())

    def forward(p, d):
        local = ops.sum((p["x"] - p["s"]) * d["t"] + p["x"] - p["s"])   # pending over tp
        return Loss(backward=local, report=all_reduce(local, Axis.TP))

    plan = Plan(mesh=Mesh(tp=tp), placements={"x": {Axis.TP: Shard(Vd)}, "t": {Axis.TP: Shard(Vd)}},
                forward=forward,
                reduce_grads={"s": lambda n, g: all_reduce(g, Axis.TP)})
    res = prove(build_problem(spec, plan), timeout_s=60)
    assert res.verdict == "EQUIVALENT", [(g.name, g.reason) for g in res.open_goals]
