"""Statistics of a sweep: bootstrap intervals, paired ratios per seed, re-targeting (issue 15)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.stats import bootstrap_mean, paired_ratios, retarget, summarize


def rec(strategy, rate, seed, ttt, **extra):
    base = {"key": {"strategy": strategy, "failure_rate": rate, "seed": seed}, "time_to_target_s": ttt,
            "iteration_s": 2.0, "failures": 0, "wall_s": 1.0, "rows": []}
    return {**base, **extra}


def test_bootstrap_mean_is_reproducible_and_brackets_the_mean():
    iv = bootstrap_mean([1.0, 2.0, 3.0, 4.0, 5.0], seed=3)
    assert iv.mean == 3.0 and iv.n == 5
    assert 1.0 <= iv.lo < 3.0 < iv.hi <= 5.0
    assert bootstrap_mean([1.0, 2.0, 3.0, 4.0, 5.0], seed=3) == iv  # seeded: same interval
    assert iv.excludes(0.5) and not iv.excludes(3.0)


def test_bootstrap_mean_edge_cases():
    assert bootstrap_mean([2.5, 2.5, 2.5]).lo == bootstrap_mean([2.5, 2.5, 2.5]).hi == 2.5
    one = bootstrap_mean([4.0])
    assert (one.mean, one.lo, one.hi, one.n) == (4.0, 4.0, 4.0, 1) and not one.excludes(1.0)
    empty = bootstrap_mean([math.nan])
    assert empty.n == 0 and math.isnan(empty.mean)
    inf = bootstrap_mean([1.0, math.inf, 2.0])
    assert math.isinf(inf.mean) and math.isinf(inf.hi) and not math.isnan(inf.lo)


@given(st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), min_size=2, max_size=12))
def test_bootstrap_interval_lies_within_the_data(xs):
    iv = bootstrap_mean(xs, n_resamples=400)
    tol = 1e-9 * (1 + max(abs(x) for x in xs))
    assert min(xs) - tol <= iv.lo <= iv.hi <= max(xs) + tol
    assert iv.mean == pytest.approx(sum(xs) / len(xs), abs=tol)


def test_paired_ratios_per_seed():
    recs = [rec("checkpoint", 0.01, 0, 100.0), rec("checkpoint", 0.01, 1, 200.0),
            rec("checkfree", 0.01, 0, 50.0), rec("checkfree", 0.01, 1, 150.0), rec("checkfree", 0.01, 2, 10.0),
            rec("no_failure", 0.0, 0, 40.0), rec("no_failure", 0.0, 1, 100.0)]
    assert paired_ratios(recs, "checkfree", 0.01, "checkpoint") == {0: 0.5, 1: 0.75}  # seed 2 has no pair
    assert paired_ratios(recs, "checkfree", 0.01, "no_failure") == {0: 1.25, 1: 1.5}
    by = {(s.strategy, s.failure_rate): s for s in summarize(recs)}
    cf = by[("checkfree", 0.01)]
    assert cf.vs_checkpoint.mean == pytest.approx(0.625) and cf.vs_checkpoint.n == 2
    assert cf.vs_failure_free.mean == pytest.approx(1.375)
    assert by[("checkpoint", 0.01)].vs_checkpoint is None and by[("no_failure", 0.0)].vs_failure_free is None
    # the unpaired figure differs from the paired one: mean(ckpt) / mean(cf) = 150 / 70
    assert cf.speedup_vs_checkpoint == pytest.approx(150.0 / 70.0)


def test_not_reached_pairs():
    recs = [rec("checkpoint", 0.1, 0, None), rec("checkfree", 0.1, 0, 5.0),
            rec("checkpoint", 0.1, 1, 10.0), rec("checkfree", 0.1, 1, None),
            rec("checkpoint", 0.1, 2, None), rec("checkfree", 0.1, 2, None)]
    assert paired_ratios(recs, "checkfree", 0.1, "checkpoint") == {0: 0.0, 1: math.inf, 2: pytest.approx(math.nan,
                                                                                                       nan_ok=True)}
    cf = {s.strategy: s for s in summarize(recs)}["checkfree"]
    assert cf.vs_checkpoint.n == 2 and math.isinf(cf.vs_checkpoint.mean)  # the both-not-reached pair is dropped
    assert cf.reached == 1


def test_summary_counts_throughput_and_iterations():
    recs = [rec("checkfree", 0.01, s, 100.0 + s, iterations_to_target=40 + s, steps_to_target=40 + s,
                failures_acted_on=3, failures_ignored=1, failures=4, iterations_done=50, tokens_per_iteration=1000,
                sim_time_s=500.0) for s in range(3)]
    (cf,) = summarize(recs)
    assert cf.iterations_to_target.mean == pytest.approx(41.0)
    assert (cf.mean_failures_acted, cf.mean_failures_ignored, cf.mean_failures) == (3.0, 1.0, 4.0)
    assert cf.tokens_per_s.mean == pytest.approx(50 * 1000 / 500.0)


def test_retarget_recomputes_from_rows_and_warns_when_runs_stopped_early():
    rows = [{"sim_time_s": 0.0, "iteration": 0, "step": 0, "val_loss": 5.0},
            {"sim_time_s": 10.0, "iteration": 5, "step": 6, "val_loss": 4.0},
            {"sim_time_s": 20.0, "iteration": 10, "step": 12, "val_loss": 3.5}]
    r = rec("checkfree", 0.01, 0, 20.0, rows=rows, target_loss=3.5, spec={"stop_at_target": True})
    (loose,) = retarget([r], 4.2)
    assert (loose["time_to_target_s"], loose["iterations_to_target"], loose["steps_to_target"]) == (10.0, 5, 6)
    with pytest.warns(UserWarning, match="1 runs stopped at their own target, above 3.0"):
        (strict,) = retarget([r], 3.0)
    assert strict["time_to_target_s"] is None and r["time_to_target_s"] == 20.0  # the input is not modified
