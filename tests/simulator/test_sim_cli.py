"""Issue 15 command-line regressions: paper-geo sweeps, threads, zero values, orphans, progress
lines, ``summarize``, ``--help``, knobs, and a small real instance of the regime preset."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_sim_e2e import synthetic_text
from test_sim_sweep import FAKE, HERE, ROOT, cli, env
from simulator.cli import main
from simulator.sweep import read_results


def sweep_args(out: Path, *extra: str) -> list[str]:
    return ["simulate", "sweep", *FAKE, "--out", str(out), "--iterations", "20", "--eval-every", "5",
            "--target-loss", "2.5", "--failure-rates", "0.05", "--seeds", "0", "1", *extra]


@pytest.mark.slow   # ~11 s; paper-geo is also priced by test_regime_ci_instance
def test_paper_geo_sweep_runs(tmp_path):
    # was: TypeError, keys must be str (the cluster's region_links in the config hash)
    out = tmp_path / "out"
    p = cli(*sweep_args(out, "--cluster", "paper-geo", "--no-progress"))
    assert p.returncode == 0, p.stderr
    recs = read_results(out / "runs.jsonl")
    assert len(recs) == 2 + 4 * 2 and {r["spec"]["cluster"] for r in recs} == {"paper-geo"}
    assert all(r["model"].startswith("CheckFree 500M") for r in recs)
    # the fake strategies do not say their actions' content: their bytes are scaled and counted
    assert sum(r["actions_scaled"] for r in recs) > 0
    p2 = cli(*sweep_args(out, "--cluster", "paper-geo", "--no-progress"))  # resume: same config hash
    assert p2.returncode == 0, p2.stderr


def test_runs_use_the_requested_torch_threads(tmp_path):
    # the THREADS fake reports torch.get_num_threads() of the process that runs the run as its loss;
    # was: `run --cluster paper-geo` kept torch's default (2 threads on this machine)
    probe = ["--backend", "fake_backend:THREADS"]
    p = cli("simulate", "run", *probe, "--cluster", "paper-geo", "--strategy", "checkfree", "--iterations", "2",
            "--out", str(tmp_path / "run"))
    assert p.returncode == 0, p.stderr
    rec = json.loads((tmp_path / "run" / "run.jsonl").read_text())
    assert {r["val_loss"] for r in rec["rows"] if r["val_loss"] is not None} == {1.0}
    p = cli("simulate", "sweep", *probe, "--out", str(tmp_path / "sw"), "--iterations", "2", "--strategies",
            "checkfree", "--failure-rates", "0.1", "--seeds", "0", "--threads", "2", "--no-progress")
    assert p.returncode == 0, p.stderr
    (rec,) = read_results(tmp_path / "sw" / "runs.jsonl")
    assert {r["val_loss"] for r in rec["rows"] if r["val_loss"] is not None} == {2.0}


@pytest.mark.parametrize("flag,value,msg", [
    ("--iterations", "0", "--iterations must be an integer >= 1, got 0"),
    ("--eval-every", "0", "--eval-every must be an integer >= 1, got 0"),
    ("--iterations", "-3", "--iterations must be an integer >= 1, got -3"),
    ("--jobs", "0", "--jobs must be an integer >= 1, got 0"),
    ("--threads", "0", "--threads must be an integer >= 1, got 0"),
    ("--checkpoint-interval", "0", "--checkpoint-interval must be an integer >= 1 or 'auto', got 0"),
    ("--redundant-overhead", "0.5", "--redundant-overhead must be a factor >= 1, got 0.5"),
])
def test_zero_and_negative_values_are_rejected(tmp_path, capsys, flag, value, msg):
    # was: --iterations 0 / --eval-every 0 silently took the preset's values
    args = sweep_args(tmp_path / "out", "--no-progress")
    if flag in args:
        args[args.index(flag) + 1] = value
    else:
        args += [flag, value]
    assert main(args) == 3
    out, err = capsys.readouterr()
    assert out == "" and err == f"shardproof: error: {msg}\n"
    assert not (tmp_path / "out" / "runs.jsonl").exists()


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(x) for x in (task / "children").read_text().split()]
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")  # a zombie has exited; only its exit status is left


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killed_sweep_leaves_no_orphans(tmp_path, sig):
    e = env()
    e["FAKE_STEP_SLEEP_S"] = "0.2"  # runs of ~4 s: the kill lands while both workers compute
    proc = subprocess.Popen([sys.executable, "-m", "simulator.cli", *sweep_args(tmp_path / "out", "--no-progress")],
                            cwd=ROOT, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        workers: list[int] = []
        while time.time() < deadline and len(workers) < 2:
            time.sleep(0.2)
            workers = [c for c in _children(proc.pid) if "spawn_main" in Path(f"/proc/{c}/cmdline").read_text()]
        assert len(workers) == 2, "the pool workers did not start"
        time.sleep(1.0)
        os.kill(proc.pid, sig)  # the sweep process alone, not its group
        proc.wait(timeout=30)
        deadline = time.time() + 15
        while time.time() < deadline and any(map(_alive, workers)):
            time.sleep(0.2)
        assert not any(map(_alive, workers)), f"orphaned pool workers {workers} after {sig.name}"
        if sig == signal.SIGTERM:
            assert proc.returncode == 128 + signal.SIGTERM
            assert "terminated; rerun the same command to resume" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.slow   # ~11 s (CI is at its 10-minute budget; `-m slow` runs it)
def test_progress_lines_and_summarize_for_another_target(tmp_path):
    out = tmp_path / "out"
    p = cli(*sweep_args(out))
    assert p.returncode == 0, p.stderr
    # stderr is a pipe here, not a terminal: one plain line per finished run (was: silence)
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("sweep: ")]
    assert lines[0] == "sweep: 10 runs, 0 already done"
    assert lines[-1].startswith("sweep: 10/10 runs done, last ") and len(lines) == 11
    before = list(csv.DictReader((out / "summary.csv").open()))
    p = cli("simulate", "summarize", str(out), "--target", "4.0")
    assert p.returncode == 0, p.stderr
    assert "time to validation loss <= 4.0" in p.stdout
    after = {(r["strategy"], r["failure_rate"]): r for r in csv.DictReader((out / "summary.csv").open())}
    # fake loss 1 + 4 exp(-k / 20) reaches 4.0 after 5.75 iterations of knowledge: the first evaluation at 10
    nf = after[("no_failure", "0.0")]
    assert float(nf["iterations_to_target"]) == 10.0
    assert float(nf["mean_time_to_target_s"]) < float({(r["strategy"], r["failure_rate"]): r
                                                       for r in before}[("no_failure", "0.0")]["mean_time_to_target_s"])
    p = cli("simulate", "summarize", str(tmp_path / "nothing"))
    assert p.returncode == 3 and "no such results file" in p.stderr


def test_help_lists_strategies_presets_and_defaults():
    p = cli("simulate", "sweep", "--help")
    assert p.returncode == 0
    for word in ("no_failure", "checkfree_plus", "redundant", "regime", "paper-full", "regime-ci", "quick",
                 "(default: 2)", "paper-geo"):
        assert word in p.stdout, word


@pytest.mark.parametrize("flags,strategy,knob", [
    (["--checkpoint-interval", "7"], "checkpoint", {"interval": 7}),
    (["--checkpoint-interval", "auto"], "checkpoint", {"interval": "auto"}),
    (["--lr-scale", "1.2"], "checkfree", {"lr_scale": 1.2}),
    (["--lr-scale", "1.2"], "checkfree_plus", {"lr_scale": 1.2}),
    (["--knob", "checkfree_plus.replica_sync=blocking"], "checkfree_plus", {"replica_sync": "blocking"}),
    (["--knob", "redundant.forward_cost=double", "--redundant-overhead", "1.5"], "redundant",
     {"forward_cost": "double"}),
])
def test_knobs_reach_the_run_spec(flags, strategy, knob):
    from simulator.cli import _build_base, build_parser
    from simulator.experiments import sweep_preset

    args = build_parser().parse_args(["simulate", "run", *FAKE, "--preset", "regime", "--cluster", "paper-geo",
                                      "--strategy", strategy, *flags])
    spec, _ = _build_base(args, sweep_preset("regime"), strategy, 0.0, 0)
    assert {k: spec.strategy_knobs[strategy][k] for k in knob} == knob
    if "--redundant-overhead" in flags:
        assert spec.redundant_overhead == 1.5
    else:
        assert spec.redundant_overhead == pytest.approx(151.04 / 91.35)  # the regime preset's


def test_regime_ci_instance(tmp_path):
    # CI's small real instance of the regime preset: the real trainer and strategies, priced on
    # paper-geo with the 500M bytes, all five strategies, loss jumps measured around recoveries
    data = tmp_path / "t.txt"
    data.write_text(synthetic_text(20_000))
    e = env()
    e["SHARDPROOF_CACHE"] = str(tmp_path / "cache")
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "simulator.cli", "simulate", "sweep", "--preset", "regime-ci",
                        "--data", str(data), "--target-loss", "100", "--out", str(out), "--no-progress"],
                       cwd=ROOT, env=e, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    recs = {r["key"]["strategy"]: r for r in read_results(out / "runs.jsonl")}
    assert set(recs) == {"no_failure", "checkfree", "checkfree_plus", "checkpoint", "redundant"}
    assert all(r["spec"]["cluster"] == "paper-geo" and r["actions_scaled"] == 0 for r in recs.values())
    assert recs["checkfree"]["failures_acted_on"] > 0 and recs["checkfree"]["failures_ignored"] > 0
    jumps = [r["val_jump"] for rec in recs.values() for r in rec["rows"] if "val_jump" in r]
    assert jumps and all(len(j) == 2 for j in jumps)
    assert recs["redundant"]["iteration_s"] == pytest.approx(151.04 / 91.35 * recs["checkpoint"]["iteration_s"])
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert {r["strategy"] for r in rows} == set(recs)
    assert (out / "loss_vs_time.png").read_bytes()[:4] == b"\x89PNG"
