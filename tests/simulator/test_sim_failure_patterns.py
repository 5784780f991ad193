"""Failure patterns of issue 16 in the simulator: mid-iteration failures, a failable embedding stage,
and the cluster's per-iteration update time."""

from __future__ import annotations

import pytest

from fake_backend import ACTIVATION_BYTES, PARAM_BYTES, STAGE_BACKWARD_S, STAGE_FORWARD_S
from simulator.cluster import Cluster, LinkSpec
from simulator.failures import BernoulliFailures, FailureDraw, MidIterationFailures, make_failure_schedule
from simulator.run import RunSpec, run_one
from simulator.schedule import simulate_iteration

N_STAGES = 5


def _cluster(**over) -> Cluster:
    kw = dict(name="fake", stage_forward_s=(STAGE_FORWARD_S,) * N_STAGES,
              stage_backward_s=(STAGE_BACKWARD_S,) * N_STAGES, activation_bytes=ACTIVATION_BYTES,
              stage_gradient_bytes=(PARAM_BYTES,) * N_STAGES, default_link=LinkSpec(0.001, 1e8),
              storage_bytes_per_s=1e8, restart_delay_s=0.05)
    kw.update(over)
    return Cluster(**kw)


def _spec(**over) -> RunSpec:
    kw = dict(strategy="checkfree", failure_rate=0.05, seed=3, iterations=40, cluster=_cluster(),
              backend="fake_backend:BACKEND", eval_every=10, micro_batches=4)
    kw.update(over)
    return RunSpec(**kw)


def test_mid_iteration_draws_keep_the_inner_stages_and_add_fractions():
    inner, twin = BernoulliFailures(0.2, 7, N_STAGES), BernoulliFailures(0.2, 7, N_STAGES)
    mid = MidIterationFailures(twin, seed=7, rate=0.2)
    draws = [mid.draw(step, 0.0, 1.0) for step in range(200)]
    assert [d.stages for d in draws] == [inner.failures(step, 0.0, 1.0) for step in range(200)]
    fractions = [d.at_fraction for d in draws if d.stages]
    assert len(fractions) > 20 and all(0.0 < f < 1.0 for f in fractions)
    assert all(d.at_fraction == 0.0 for d in draws if not d.stages)
    again = MidIterationFailures(BernoulliFailures(0.2, 7, N_STAGES), seed=7, rate=0.2)
    assert [again.draw(s, 0.0, 1.0) for s in range(200)] == draws  # seeded: every strategy sees these


def test_boundary_schedules_draw_at_fraction_zero():
    schedule, twin = make_failure_schedule("bernoulli", 0.5, 1, N_STAGES), BernoulliFailures(0.5, 1, N_STAGES)
    assert [schedule.draw(s, 0.0, 1.0) for s in range(20)] == [FailureDraw(twin.failures(s, 0.0, 1.0), 0.0)
                                                                 for s in range(20)]
    assert make_failure_schedule("bernoulli", 0.5, 1, N_STAGES, mid_iteration=True).describe()["mid_iteration"]


def test_mid_iteration_run_charges_the_lost_partial_work():
    boundary = run_one(_spec())
    mid = run_one(_spec(mid_iteration=True))
    lost = [e for r in mid["rows"] for e in r["strategy_events"] if e["action"] == "LostWork"]
    assert lost and boundary["failures"] == mid["failures"]
    it = simulate_iteration(_cluster(), 4).iteration_s
    assert all(e["cost_s"] == pytest.approx(e["at_fraction"] * it) for e in lost)
    # same draws, same repairs: the clocks differ by exactly the lost partial iterations
    assert mid["sim_time_s"] - boundary["sim_time_s"] == pytest.approx(sum(e["cost_s"] for e in lost))


def test_failable_embedding_stage():
    default = make_failure_schedule("bernoulli", 0.5, 0, N_STAGES)
    assert 0 not in default.failable
    every = make_failure_schedule("bernoulli", 0.5, 0, N_STAGES, failable=range(N_STAGES))
    assert every.failable == (0, 1, 2, 3, 4)
    rec = run_one(_spec(failable_embedding=True, failure_rate=0.2))
    assert any(0 in r["failures"] for r in rec["rows"])
    assert rec["failure_schedule"]["failable"] == [0, 1, 2, 3, 4]


def test_update_seconds_add_to_every_iteration_and_round_trip():
    base = simulate_iteration(_cluster(), 4, schedule="gpipe").iteration_s
    with_update = _cluster(update_s=0.125)
    assert simulate_iteration(with_update, 4, schedule="gpipe").iteration_s == pytest.approx(base + 0.125)
    assert Cluster.from_dict(with_update.to_dict()) == with_update
    legacy = with_update.to_dict()
    del legacy["update_s"]
    assert Cluster.from_dict(legacy).update_s == 0.0  # clusters saved before the field existed
    from simulator.errors import SimulationError

    with pytest.raises(SimulationError, match="update_s must be a finite number >= 0 s, got -1"):
        _cluster(update_s=-1.0)


def test_stop_at_target_keeps_the_time_to_target():
    full = run_one(_spec(strategy="redundant", target_loss=3.0, iterations=60))
    short = run_one(_spec(strategy="redundant", target_loss=3.0, iterations=60, stop_at_target=True))
    assert full["time_to_target_s"] is not None
    assert short["time_to_target_s"] == full["time_to_target_s"]
    assert short["steps"] < full["steps"] and short["rows"] == full["rows"][:len(short["rows"])]
    assert short["rows"][-1]["val_loss"] <= 3.0


@pytest.mark.parametrize("strategy, mult, swap", [("checkpoint", 1.0, False), ("redundant", 2.0, False),
                                                  ("checkfree_plus", 1.0, True), ("checkfree", 1.0, False)])
@pytest.mark.parametrize("mid", [False, True])
def test_reprice_on_the_runs_own_cluster_reproduces_its_clock(strategy, mult, swap, mid):
    from simulator.reprice import reprice

    rec = run_one(_spec(strategy=strategy, failure_rate=0.04, target_loss=3.5, mid_iteration=mid, schedule="gpipe"))
    again = reprice(rec, _cluster(), forward_multiplier=mult, swap_odd=swap, micro_batches=4, schedule="gpipe")
    assert [t for _, t, _ in again["rows"]] == pytest.approx([r["sim_time_s"] for r in rec["rows"]], rel=1e-12)
    assert again["time_to_target_s"] == pytest.approx(rec["time_to_target_s"])
    slower = reprice(rec, _cluster(restart_delay_s=1.0), forward_multiplier=mult, swap_odd=swap, schedule="gpipe")
    restarts = sum(1 for r in rec["rows"] for e in r["strategy_events"] if e["action"] == "Restart")
    assert slower["rows"][-1][1] == pytest.approx(again["rows"][-1][1] + restarts * (1.0 - 0.05))
