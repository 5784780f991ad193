"""Reduce-scatter as an event of an explicit schedule (FSDP's per-micro-batch gradient
reduce-scatter): buffer semantics, proofs and refutations."""

from __future__ import annotations

from fractions import Fraction

import pytest

from proofs.prover import prove
from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_gather, all_reduce, build_problem,
    microbatches, ops, real,
)
from spec_lang.pipeline import Accumulation
from spec_lang.schedules import B, F, buffer_after, collective, reduce_scatter

DP, DPR, DPS = Axis.DP, Axis.DP_REPLICATE, Axis.DP_SHARD


def test_reduce_scatter_moves_the_unsharded_buffer():
    ev = [F(0), B(0), reduce_scatter(DP, "H", "sum"), F(1), B(1)]
    buf = buffer_after(ev, 2)
    assert buf.describe() == "RS_sum[dp, H](1*g0) + 1*g1"
    done = buffer_after(ev + [reduce_scatter(DP, "H", "sum")], 2)
    assert done.describe() == "RS_sum[dp, H](1*g0 + 1*g1)"


def _fsdp(events, *, seed_scale=1, mesh=None, axis=DP):
    Bd, H = Dim("B", 8), Dim("H", 4)
    spec = Spec(params={"w": (H,)}, data={"x": real(Bd, H)},
                forward=lambda p, d: ops.sum(p["w"] * p["w"] * d["x"]) / ops.dim_size(Bd),
                optimizer=SGD(lr=Fraction(1, 10)))
    mesh = mesh or Mesh(dp=2)
    data_axes = [a for a in mesh.sizes]

    def forward(p, d):
        local = ops.sum(p["w"] * p["w"] * d["x"]) / ops.dim_size(Bd)
        rep = local
        for a in data_axes:
            rep = all_reduce(rep, a)
        scale = ops.axis_size(DP) if seed_scale == "dp" else seed_scale
        return Loss(backward=scale * local, report=rep)

    plan = Plan(mesh=mesh, placements={"x": {a: Shard(Bd) for a in data_axes}},
                forward=forward, microbatches=microbatches(2, Bd),
                schedule=Accumulation(events, 2),
                optimizer_placements={"w": {axis: Shard(H)}},
                gather_params=lambda n, new: all_gather(new, axis, H))
    return build_problem(spec, plan)


def test_per_microbatch_reduce_scatter_is_certified():
    rs = reduce_scatter(DP, "H", "sum")
    assert prove(_fsdp([F(0), B(0), rs, F(1), B(1), rs]), timeout_s=60).verdict == "EQUIVALENT"


def test_no_sync_then_one_reduce_scatter_is_certified():
    rs = reduce_scatter(DP, "H", "sum")
    assert prove(_fsdp([F(0), B(0), F(1), B(1), rs]), timeout_s=60).verdict == "EQUIVALENT"


def test_a_micro_batch_left_in_the_unsharded_buffer_is_lost():
    rs = reduce_scatter(DP, "H", "sum", note="fired before the last backward")
    r = prove(_fsdp([F(0), B(0), rs, F(1), B(1)]), timeout_s=60)
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == "grad:w"
    assert "RS_sum[dp, H]" in r.counterexample.render()


def test_reduce_scatter_avg_needs_its_prefactor():
    rs = reduce_scatter(DP, "H", "avg")
    r = prove(_fsdp([F(0), B(0), F(1), B(1), rs]), timeout_s=60)
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.ratio == pytest.approx(0.5)
    ok = _fsdp([F(0), B(0), F(1), B(1), rs], seed_scale="dp")
    assert prove(ok, timeout_s=60).verdict == "EQUIVALENT"


def test_hsdp_reduce_scatter_then_replicate_all_reduce():
    ev = [F(0), B(0), F(1), B(1), reduce_scatter(DPS, "H", "sum"), collective(DPR, "sum")]
    pr = _fsdp(ev, mesh=Mesh(dp_replicate=2, dp_shard=2), axis=DPS)
    assert prove(pr, timeout_s=60).verdict == "EQUIVALENT"
    missing = [F(0), B(0), F(1), B(1), reduce_scatter(DPS, "H", "sum")]
    r = prove(_fsdp(missing, mesh=Mesh(dp_replicate=2, dp_shard=2), axis=DPS), timeout_s=60)
    assert r.verdict == "NOT EQUIVALENT"
