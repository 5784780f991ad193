"""The dimensionless quantities of docs/fidelity.md: the paper's from its table, ours from records."""

from __future__ import annotations

import pytest

from simulator.regime import measured_regime, paper_regime, regime_markdown


def test_paper_quantities_from_its_table():
    five, ten, sixteen = paper_regime()
    assert five["failures_per_stage"] == pytest.approx(9.0)  # 0.0009 x 10,000
    # CheckFree+: 14.0k iterations, 6 stages x 0.0009 x 14k = 75.6 failures, 4k iterations lost
    assert five["checkfree_plus_failures"] == pytest.approx(75.6)
    assert five["checkfree_plus_damage_iters"] == pytest.approx(4000 / 75.6)
    assert sixteen["checkfree_lost_fraction"] == pytest.approx(1 - 10 / 22)
    assert ten["failures_per_interval"] == pytest.approx(1.2)
    # the paper's training time is iterations x iteration time: 14.0k x 91.32 s = 355.13 h
    assert five["checkfree_plus_vs_checkpoint"] == pytest.approx(355.13 / 558.23)
    assert sixteen["redundant_vs_checkpoint"] < sixteen["checkfree_plus_vs_checkpoint"]


def _rec(strategy, rate, seed, steps, acted=0, jumps=()):
    rows = [{"iteration": i, "val_loss": 5.0 - 0.01 * i} for i in range(0, 200, 10)]
    rows += [{"iteration": it, "val_loss": None, "val_jump": [1.0, 1.0 + j]} for it, j in jumps]
    return {"key": {"strategy": strategy, "failure_rate": rate, "seed": seed}, "steps_to_target": steps,
            "failures_acted_on": acted, "rows": rows, "failure_schedule": {"failable": [1, 2, 3, 4, 5, 6]}}


def test_measured_quantities():
    recs = [_rec("no_failure", 0.0, 0, 100), _rec("no_failure", 0.0, 1, 120),
            _rec("checkfree", 0.01, 0, 150, acted=10, jumps=[(50, 0.05), (80, 0.03)]),
            _rec("checkfree", 0.01, 1, 180, acted=20),
            _rec("checkpoint", 0.01, 0, 200, acted=5), _rec("checkpoint", 0.01, 1, 240, acted=6)]
    (row,) = measured_regime(recs, checkpoint_interval=12)
    assert row.n0.mean == 110.0 and row.failures_per_stage.mean == pytest.approx(1.1)
    assert row.damage_iters["checkfree"].mean == pytest.approx((50 / 10 + 60 / 20) / 2)
    assert row.lost_fraction["checkpoint"].mean == pytest.approx((0.5 + 0.5) / 2)
    # the failure-free curve falls 0.01 nats per iteration: a 0.05 jump is 5 iterations of progress
    assert row.jump_nats.mean == pytest.approx(0.04) and row.jump_iters.mean == pytest.approx(4.0)
    assert row.failures_per_interval == pytest.approx(12 * 6 * 0.01)
    table = regime_markdown(recs, 12)
    assert table.startswith("| quantity | paper 5 % (p 0.0009) | ours p 0.01 |")
    assert "| stage failures per stage before target, p N0 | 9 | 1.1 [1, 1.2] |" in table


def test_paper_full_dry_run_estimate():
    from simulator.experiments import PAPER_500M_MODEL, _param_count, _train_flops_per_iteration, dry_run_report

    # the paper's 500M: 6 x 4 layers of 16 d^2 (+ norms) and a 2 V d embedding stage
    d, v = 1024, 32000
    assert _param_count(PAPER_500M_MODEL) == 24 * (16 * d * d + 2 * d) + 2 * v * d + d
    tokens = 16 * 1024 * 4
    layer_flops = 2 * 16 * 1024 * 16 * d * d + 4 * 16 * 1024 * 1024 * d  # per micro-batch
    head_flops = 2 * 16 * 1024 * d * v
    assert _train_flops_per_iteration(PAPER_500M_MODEL) == 3 * 4 * (24 * layer_flops + head_flops)
    assert 6 * 468e6 * tokens < _train_flops_per_iteration(PAPER_500M_MODEL) < 6 * 500e6 * tokens * 1.2
    report = dry_run_report("paper-full", ["no_failure", "checkfree", "checkfree_plus", "checkpoint", "redundant"],
                            [0.0009, 0.002, 0.004], [0, 1, 2, 3, 4], measure=False)
    assert "runs: 65" in report and "train steps: 1,052,000" in report and "A100-hours" in report
