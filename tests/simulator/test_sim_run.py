"""One run with the fake trainer: the simulated clock adds iterations and priced actions."""

from __future__ import annotations

import math

import pytest

from fake_backend import ACTIVATION_BYTES, PARAM_BYTES, STAGE_BACKWARD_S, STAGE_FORWARD_S
from simulator.cluster import Cluster, LinkSpec
from simulator.cost import price_actions
from simulator.errors import SimulationError
from simulator.run import RunSpec, run_one, time_to_target_s
from simulator.schedule import simulate_iteration
from trainer.strategies.base import Restart, Rollback, StorageRead, StorageWrite, Transfer

N_STAGES = 5  # fake trainer default: 4 transformer stages + embedding stage


def fake_cluster() -> Cluster:
    return Cluster(name="fake", stage_forward_s=(STAGE_FORWARD_S,) * N_STAGES,
                   stage_backward_s=(STAGE_BACKWARD_S,) * N_STAGES, activation_bytes=ACTIVATION_BYTES,
                   stage_gradient_bytes=(PARAM_BYTES,) * N_STAGES, default_link=LinkSpec(0.001, 1e8),
                   storage_bytes_per_s=1e8, restart_delay_s=0.05)


def spec(**over) -> RunSpec:
    kw = dict(strategy="checkfree", failure_rate=0.0, seed=0, iterations=30, cluster=fake_cluster(),
              backend="fake_backend:BACKEND", eval_every=10, micro_batches=4)
    kw.update(over)
    return RunSpec(**kw)


def _actions(events):
    table = {"Transfer": Transfer, "StorageWrite": StorageWrite, "StorageRead": StorageRead, "Restart": Restart,
             "Rollback": Rollback}
    return [table[e["action"]](**{k: v for k, v in e.items() if k not in ("action", "phase", "cost_s")})
            for e in events]


def test_failure_free_clock_is_iterations_times_schedule():
    rec = run_one(spec(strategy="no_failure", failure_rate=0.3))
    it = simulate_iteration(fake_cluster(), 4).iteration_s
    assert rec["iteration_s"] == it
    assert rec["failures"] == 0 and rec["steps"] == 30
    assert rec["sim_time_s"] == pytest.approx(30 * it)
    assert [r["iteration"] for r in rec["rows"] if r["val_loss"] is not None] == [0, 10, 20, 30]


def test_clock_adds_priced_actions_and_redone_iterations():
    c = fake_cluster()
    rec = run_one(spec(strategy="checkpoint", failure_rate=0.03, seed=1, iterations=40))
    it = simulate_iteration(c, 4).iteration_s
    assert rec["failures"] > 0
    assert rec["steps"] > rec["iterations_done"] == 40  # rolled-back iterations were run again
    priced = sum(price_actions(c, _actions([e for e in r["strategy_events"] if e["phase"] == ph]))
                 for r in rec["rows"] for ph in ("failure", "iteration_end"))
    assert rec["sim_time_s"] == pytest.approx(rec["steps"] * it + priced)
    restart = sum(1 for r in rec["rows"] for e in r["strategy_events"] if e["action"] == "Restart")
    assert priced >= restart * c.restart_delay_s


def test_rows_are_monotone_in_time_and_iterations_go_back_on_rollback():
    rec = run_one(spec(strategy="checkpoint", failure_rate=0.05, seed=2, iterations=40))
    times = [r["sim_time_s"] for r in rec["rows"]]
    assert times == sorted(times)
    its = [r["iteration"] for r in rec["rows"]]
    assert any(b < a for a, b in zip(its, its[1:]))


def test_redundant_multiplier_and_swap_change_iteration_time():
    c = fake_cluster()
    red = run_one(spec(strategy="redundant"))
    plus = run_one(spec(strategy="checkfree_plus"))
    assert red["iteration_s"] == simulate_iteration(c, 4, forward_multiplier=lambda s: 2.0).iteration_s
    assert plus["iteration_s"] == simulate_iteration(c, 4, swap_odd=True).iteration_s


def test_time_to_target():
    rows = [{"sim_time_s": 0.0, "val_loss": 5.0}, {"sim_time_s": 1.0, "val_loss": None},
            {"sim_time_s": 2.0, "val_loss": 3.0}, {"sim_time_s": 3.0, "val_loss": 2.0}]
    assert time_to_target_s(rows, 3.0) == 2.0
    assert time_to_target_s(rows, 1.0) == math.inf
    rec = run_one(spec(strategy="no_failure", target_loss=1.5))
    assert rec["time_to_target_s"] is None  # fake loss 1 + 4 exp(-30/20) = 1.89 > 1.5


def test_stage_count_mismatch():
    with pytest.raises(SimulationError, match="cluster 'fake' has 5 stages, the trainer 7"):
        run_one(spec(trainer_config={"n_stages": 6}))
