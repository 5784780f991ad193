"""Sweeps: results file integrity, resume after a kill, summaries, CLI errors (exit 3), ray."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simulator.errors import SimulationError
from simulator.sweep import append_result, read_results, summarize

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
FAKE = ["--backend", "fake_backend:BACKEND"]


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE), e.get("PYTHONPATH", "")])
    return e


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "simulator.cli", *args], cwd=ROOT, env=env(),
                          capture_output=True, text=True, timeout=timeout)


def record(strategy: str, rate: float, seed: int, ttt: float | None, **extra) -> dict:
    return {"key": {"strategy": strategy, "failure_rate": rate, "seed": seed}, "time_to_target_s": ttt,
            "iteration_s": 1.0, "failures": 0, "wall_s": 1.0, "rows": [], **extra}


# -- results file ----------------------------------------------------------------------------------

def test_append_and_read_round_trip(tmp_path):
    path = tmp_path / "runs.jsonl"
    recs = [record("checkfree", 0.01, s, 10.0 + s) for s in range(3)]
    for r in recs:
        append_result(path, r)
    assert read_results(path) == recs
    assert path.read_text().count("\n") == 3


def test_truncated_last_line_is_dropped_with_warning(tmp_path):
    path = tmp_path / "runs.jsonl"
    append_result(path, record("checkfree", 0.01, 0, 1.0))
    with open(path, "ab") as f:
        f.write(b'{"key": {"strategy": "checkp')  # a kill mid-write
    with pytest.warns(UserWarning, match=r"runs.jsonl:2: dropping incomplete last line"):
        got = read_results(path)
    assert len(got) == 1
    append_result(path, record("checkpoint", 0.01, 0, 2.0))  # appends stay line-aligned
    assert [r["key"]["strategy"] for r in read_results(path)] == ["checkfree", "checkpoint"]


def test_corrupt_middle_line_names_file_and_line(tmp_path):
    path = tmp_path / "runs.jsonl"
    append_result(path, record("checkfree", 0.01, 0, 1.0))
    with open(path, "ab") as f:
        f.write(b"garbage\n")
    append_result(path, record("checkfree", 0.01, 1, 1.0))
    with pytest.raises(SimulationError, match=r"runs.jsonl:2: corrupt results line"):
        read_results(path)


def test_summary_mean_std_inf_and_speedup():
    recs = [record("checkpoint", 0.01, 0, 100.0), record("checkpoint", 0.01, 1, 140.0),
            record("checkfree", 0.01, 0, 50.0), record("checkfree", 0.01, 1, 30.0),
            record("redundant", 0.01, 0, None), record("redundant", 0.01, 1, 20.0)]
    by = {(s.strategy, s.failure_rate): s for s in summarize(recs)}
    ck, cf, rd = by[("checkpoint", 0.01)], by[("checkfree", 0.01)], by[("redundant", 0.01)]
    assert ck.mean_s == 120.0 and ck.std_s == pytest.approx(math.sqrt(800))  # sample std
    assert cf.speedup_vs_checkpoint == pytest.approx(120.0 / 40.0)
    assert math.isinf(rd.mean_s) and rd.reached == 1 and rd.speedup_vs_checkpoint == 0.0


# -- CLI with the fake trainer -----------------------------------------------------------------------

def sweep_args(out: Path, *extra: str) -> list[str]:
    return ["simulate", "sweep", *FAKE, "--out", str(out), "--iterations", "30", "--eval-every", "5",
            "--target-loss", "2.5", "--failure-rates", "0.01,0.05", "--seeds", "0", "1", "--no-progress", *extra]


@pytest.mark.slow   # ~10 s (CI is at its 10-minute budget; `-m slow` runs it)
def test_fake_sweep_outputs(tmp_path):
    out = tmp_path / "out"
    p = cli(*sweep_args(out))
    assert p.returncode == 0, p.stderr
    assert "time to validation loss <= 2.5" in p.stdout and "checkfree_plus" in p.stdout
    lines = (out / "runs.jsonl").read_text().splitlines()
    assert len(lines) == 2 + 4 * 2 * 2  # no_failure once per seed
    for name in ("summary.csv", "loss_vs_time.png", "time_to_target.png", "cluster.json"):
        assert (out / name).stat().st_size > 0
    header = (out / "summary.csv").read_text().splitlines()[0]
    assert header.startswith("strategy,failure_rate,seeds,reached,mean_time_to_target_s")


def test_resume_after_kill_runs_each_key_exactly_once(tmp_path):
    out = tmp_path / "out"
    args = sweep_args(out, "--jobs", "1")
    args[args.index("--iterations") + 1] = "20"
    # slow fake steps: the sweep is killed after the first run lands
    env_slow = env()
    env_slow["FAKE_STEP_SLEEP_S"] = "0.03"
    proc = subprocess.Popen([sys.executable, "-m", "simulator.cli", *args], cwd=ROOT, env=env_slow,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    path = out / "runs.jsonl"
    deadline = time.time() + 60
    try:
        while time.time() < deadline:
            if path.exists() and path.read_bytes().count(b"\n") >= 1:
                break
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its pool workers: our own process group
        proc.wait()
    first = read_results(path)
    assert 1 <= len(first) < 18
    with open(path, "ab") as f:
        f.write(b'{"key": {"strat')  # as if the kill hit mid-write
    p = cli(*args)
    assert p.returncode == 0, p.stderr
    assert "dropping incomplete last line" in p.stderr
    keys = [(r["key"]["strategy"], r["key"]["failure_rate"], r["key"]["seed"]) for r in read_results(path)]
    assert len(keys) == len(set(keys)) == 18
    assert [json.loads(line) for line in path.read_text().splitlines()[: len(first)]] == first  # kept as is


@pytest.mark.parametrize("extra,msg", [
    (["--strategies", "checkfree,teleport"], "unknown strategy 'teleport'"),
    (["--failure-rates", "1.5"], r"failure rate 1.5 is outside [0, 1)"),
    (["--failure-model", "trace", "--trace", "/nonexistent/t.json"], "failure trace not found"),
    (["--data", "/nonexistent/corpus.txt"], "--data /nonexistent/corpus.txt: no such file"),
])
def test_bad_input_exits_3(tmp_path, extra, msg):
    p = cli(*sweep_args(tmp_path / "out", *extra))
    assert p.returncode == 3
    assert p.stdout == ""
    assert p.stderr.startswith("shardproof: error: ") and msg in p.stderr
    assert p.stderr.count("\n") == 1


def test_bad_trace_stage_exits_3(tmp_path):
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps([{"time_s": 0.5, "stage": 2}, {"time_s": 1.0, "stage": 12}]))
    p = cli(*sweep_args(tmp_path / "out", "--failure-model", "trace", "--trace", str(trace)))
    assert p.returncode == 3
    assert f"shardproof: error: {trace}: entry 1: stage 12 does not exist" in p.stderr


def test_corrupt_results_exit_3(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "runs.jsonl").write_text('{"key": {"strategy": "checkfree"}}\nnot json\n{"key": {}}\n')
    p = cli(*sweep_args(out))
    assert p.returncode == 3
    assert f"shardproof: error: {out / 'runs.jsonl'}:2: corrupt results line" in p.stderr


def test_run_command_prints_log(tmp_path):
    p = cli("simulate", "run", *FAKE, "--strategy", "checkpoint", "--failure-rate", "0.05", "--seed", "3",
            "--iterations", "20", "--eval-every", "5", "--out", str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "time to target" in p.stdout
    rec = json.loads((tmp_path / "run.jsonl").read_text())
    assert rec["key"] == {"strategy": "checkpoint", "failure_rate": 0.05, "seed": 3}


def test_unknown_executor_is_a_usage_error(tmp_path):
    p = cli(*sweep_args(tmp_path / "out", "--executor", "slurm"))
    assert p.returncode == 2


@pytest.mark.ray
@pytest.mark.slow  # starting a local ray cluster takes ~30-60 s here
def test_ray_executor(tmp_path):
    pytest.importorskip("ray")
    out = tmp_path / "out"
    p = cli(*sweep_args(out, "--executor", "ray", "--strategies", "checkfree,checkpoint", "--seeds", "0"),
            timeout=300)
    assert p.returncode == 0, p.stderr
    assert len((out / "runs.jsonl").read_text().splitlines()) == 4


def test_ray_missing_gives_clear_error(tmp_path, monkeypatch):
    from simulator import sweep as sw

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(SimulationError, match=r"--executor ray needs ray: pip install 'shardproof\[ray\]'"):
        list(sw._ray_results([], 1))


def test_summary_target_met_at_time_zero():
    by = {s.strategy: s for s in summarize([record("checkpoint", 0.1, 0, 0.0), record("checkfree", 0.1, 0, 0.0)])}
    assert by["checkfree"].speedup_vs_checkpoint == 1.0


def test_run_on_paper_geo_prices_the_paper_cluster(tmp_path):
    from simulator.presets import paper_geo_iteration_times

    p = cli("simulate", "run", *FAKE, "--cluster", "paper-geo", "--strategy", "redundant", "--iterations", "5",
            "--out", str(tmp_path))
    assert p.returncode == 0, p.stderr
    rec = json.loads((tmp_path / "run.jsonl").read_text())
    # the fake "redundant" doubles every forward (forward_multiplier 2.0)
    assert rec["iteration_s"] == pytest.approx(paper_geo_iteration_times("gpipe")["redundant_x2"])
    assert rec["sim_time_s"] == pytest.approx(5 * rec["iteration_s"])


def test_second_writer_is_refused(tmp_path):
    from simulator.sweep import _lock

    out = tmp_path / "out"
    out.mkdir()
    held = _lock(out)
    try:
        p = cli(*sweep_args(out))
        assert p.returncode == 3 and "another sweep is writing here" in p.stderr
    finally:
        held.close()


def test_run_replays_bamboo_trace(tmp_path):
    trace = ROOT / ".." / "shared" / "data" / "traces" / "bamboo" / "p3-trace.csv"
    if not trace.exists():
        pytest.skip("shared Bamboo traces not present")
    # fake iterations take ~0.2 s simulated; compress the 11 h trace so it spans the run
    p = cli("simulate", "run", *FAKE, "--strategy", "checkfree", "--failure-model", "bamboo", "--trace", str(trace),
            "--trace-time-scale", "0.0001", "--iterations", "30", "--out", str(tmp_path))
    assert p.returncode == 0, p.stderr
    rec = json.loads((tmp_path / "run.jsonl").read_text())
    assert rec["failure_schedule"]["model"] == "BambooTraceFailures"
    assert rec["failure_schedule"]["removals"] == 167
    assert any(len(r["failures"]) >= 2 for r in rec["rows"])  # bulk removals reach one boundary together


def test_fields_added_later_count_in_the_config_hash_only_away_from_their_defaults():
    """A sweep stored before issue 16's fields existed resumes: its hash is the one it was stored with
    (the regime preset's seed-0 runs of issue 15: 224257d4b0562e49); the fields still tell configs apart."""
    from dataclasses import replace

    from simulator.experiments import sweep_preset
    from simulator.presets import paper_geo_cluster
    from simulator.run import RunSpec
    from simulator.sweep import SweepSpec

    preset = sweep_preset("regime")
    cfg = dict(preset.trainer_config, n_stages=6)
    base = RunSpec(strategy="checkfree", failure_rate=0.03, seed=0, iterations=preset.iterations,
                   cluster=paper_geo_cluster(), trainer_config=cfg, strategy_knobs=preset.strategy_knobs,
                   eval_every=preset.eval_every, eval_batches=preset.eval_batches, schedule=preset.schedule,
                   target_loss=preset.target_loss, max_steps_factor=preset.max_steps_factor,
                   redundant_overhead=preset.redundant_overhead, stop_at_target=True,
                   jump_eval_batches=preset.jump_eval_batches, action_time_scale=preset.action_time_scale)

    def sha(spec):
        return SweepSpec(strategies=("checkfree",), failure_rates=(0.03,), seeds=(0,), base=spec).config_sha256()

    assert sha(base) == "224257d4b0562e49"
    assert sha(replace(base, mid_iteration=True)) != sha(base)
    assert sha(replace(base, failable_embedding=True)) != sha(base)
    assert sha(replace(base, cluster=replace(base.cluster, update_s=0.01))) != sha(base)
    assert sha(replace(base, cluster=replace(base.cluster, host_cores=2.0))) != sha(base)


def test_every_strategy_gets_its_own_colour():
    """The paper's five keep their colours; the others get distinct ones (the five-seed regime
    plot drew issue 16's strategies in the colours of CheckFree and checkpointing)."""
    from simulator.plots import COLORS, strategy_colors

    names = ["no_failure", "checkfree", "checkfree_plus", "checkpoint", "redundant",
             "checkfree_adam", "neighbour_copy"]
    colors = strategy_colors(names)
    assert len(set(colors.values())) == len(names)
    assert all(colors[k] == v for k, v in COLORS.items())
