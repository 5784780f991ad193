"""Failure schedules: reproducibility, identity across strategies, traces, bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from simulator.errors import SimulationError
from simulator.failures import (
    BambooTraceFailures,
    BernoulliFailures,
    HourlyFailures,
    TraceFailures,
    bamboo_trace_stats,
    make_failure_schedule,
)

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "traces" / "bamboo"
P3 = TRACES / "p3-trace.csv"
needs_traces = pytest.mark.skipif(not P3.exists(), reason="shared Bamboo traces not present")


def draws(schedule, steps=2000, iteration_s=1.0):
    return [schedule.failures(i, i * iteration_s, iteration_s) for i in range(steps)]


def test_same_seed_same_failures_and_other_seed_differs():
    a = draws(BernoulliFailures(0.01, seed=3, n_stages=7))
    b = draws(BernoulliFailures(0.01, seed=3, n_stages=7))
    c = draws(BernoulliFailures(0.01, seed=4, n_stages=7))
    assert a == b
    assert a != c
    assert sum(map(len, a)) > 0


def test_rate_matches_probability():
    p, steps, stages = 0.05, 20000, 6
    n = sum(map(len, draws(BernoulliFailures(p, seed=0, n_stages=stages + 1), steps)))
    expected = p * steps * stages
    assert abs(n - expected) < 4 * math.sqrt(expected * (1 - p))


def test_stage0_is_not_failable_by_default():
    got = draws(BernoulliFailures(0.5, seed=0, n_stages=5), 200)
    assert {s for f in got for s in f} == {1, 2, 3, 4}


def test_hourly_converts_with_iteration_time():
    # p = 1 - exp(-rate * it / 3600); same uniforms as Bernoulli seeded from the same (seed, rate)
    rate, it = 36.0, 10.0
    p = -math.expm1(-rate * it / 3600)
    hourly = HourlyFailures(rate, seed=1, n_stages=5)
    bern = BernoulliFailures(0.5, seed=1, n_stages=5)
    bern.rng = np.random.default_rng(np.random.SeedSequence([1, int(np.float64(rate).view(np.uint64))]))
    bern.p = p
    assert draws(hourly, 500, it) == draws(bern, 500, it)


@pytest.mark.parametrize("rate", [-0.1, 1.0, 1.5, float("nan")])
def test_rate_outside_unit_interval(rate):
    with pytest.raises(SimulationError, match=r"outside \[0, 1\)"):
        make_failure_schedule("bernoulli", rate, 0, 5)


def test_identical_across_strategies(tmp_path):
    # the schedule depends on (seed, rate) only: every strategy meets the same failures per step
    from simulator.run import RunSpec, run_one
    from test_sim_run import fake_cluster

    logs = {}
    for strategy in ("checkfree", "checkfree_plus", "redundant", "checkpoint"):
        rec = run_one(RunSpec(strategy=strategy, failure_rate=0.05, seed=7, iterations=40, cluster=fake_cluster(),
                              backend="fake_backend:BACKEND", eval_every=10))
        logs[strategy] = [tuple(r["failures"]) for r in rec["rows"][1:]]
    first = min(len(v) for v in logs.values())
    ref = logs["checkfree"][:first]
    assert any(ref)
    for v in logs.values():
        assert v[:first] == ref


# -- JSON traces -----------------------------------------------------------------------------------

def test_json_trace_fires_at_first_boundary_after_time(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps([{"time_s": 2.5, "stage": 1}, {"time_s": 2.7, "stage": 3}, {"time_s": 0, "stage": 2}]))
    sched = TraceFailures(path, n_stages=4)
    assert draws(sched, 5, 1.0) == [(2,), (), (), (1, 3), ()]


@pytest.mark.parametrize("content,msg", [
    ([{"time_s": 1.0, "stage": 1}, {"time_s": 2.0, "stage": 9}], r"t.json: entry 1: stage 9 does not exist \(stages 0..4\)"),
    ([{"time_s": -1.0, "stage": 1}], r"t.json: entry 0: time_s must be a finite number >= 0, got -1.0"),
    ([{"when": 1.0}], r"t.json: entry 0: expected"),
    ({"time_s": 1.0}, r"t.json: a failure trace is a JSON list"),
])
def test_json_trace_bad_entries(tmp_path, content, msg):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(content))
    with pytest.raises(SimulationError, match=msg) as info:
        TraceFailures(path, n_stages=5)
    assert "\n" not in str(info.value)


def test_json_trace_missing_or_not_json(tmp_path):
    with pytest.raises(SimulationError, match="failure trace not found"):
        TraceFailures(tmp_path / "nope.json", n_stages=5)
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(SimulationError, match="not a JSON failure trace"):
        TraceFailures(tmp_path / "x.json", n_stages=5)


# -- Bamboo EC2 traces -----------------------------------------------------------------------------

@needs_traces
def test_p3_poisson_fit_and_bulk_removals():
    st = bamboo_trace_stats(P3)
    assert st.removals == 167
    assert st.removals_per_node_hour == pytest.approx(0.61, abs=0.01)  # traces/README.md
    assert st.bulk_removals == 128 and st.max_removals_per_minute == 6


@needs_traces
def test_p3_replay_keeps_same_minute_bulk_removals():
    sched = BambooTraceFailures(P3, n_stages=7)
    # 60 s iterations: every minute of the trace is one boundary
    got = draws(sched, 700, 60.0)
    assert sum(1 for f in got if len(f) >= 2) > 10  # several stages at one boundary
    assert len(sched.node_stage) == 177 and set(sched.node_stage.values()) == set(range(1, 7))
    assert all(set(f) <= set(range(1, 7)) for f in got)


def test_bamboo_bad_row(tmp_path):
    path = tmp_path / "b.csv"
    path.write_text("0,add,node1\n60000,explode,node1\n")
    with pytest.raises(SimulationError, match=r"b.csv: line 2: expected time_ms,add\|remove,node"):
        BambooTraceFailures(path, n_stages=4)
