"""Real multi-process runs against the simulator's prediction of the same runs (issue 16, item 3).

    python bench/real_vs_sim.py --out results/real [--strategies ...] [--rate 0.01] [--seed 0]
                                [--iterations 200] [--mid-iteration] [--phase real|predict|all]

1. `calibrate`: the `local-real` cluster of the quick model on this machine (OUT/calibration.json,
   kept when present; simulator/calibrate.py).
2. `real`: for every strategy, a real run (one process per stage, SIGKILL on the seeded Bernoulli
   schedule, recovery by real transfers) to the quick preset's target: OUT/<strategy>.json and the
   incremental OUT/<strategy>.jsonl. A finished strategy is not run again (resumable).
3. `predict`: the simulator's clock for the same run (same seed, same failure draws, the same
   trainer, so the same losses and the same strategy events: tests/distributed checks the real rows
   against `run_one`'s) on the calibrated cluster, with the host load the real run's own operations
   measured (the other programs on a shared machine are an input, like a failure trace). The clock
   is computed by `simulator.reprice` on the real run's event sequence rather than by training the
   model a second time in-process; `--full-simulation STRATEGY...` also runs `run_one` for those
   strategies and checks both clocks agree. Then the table of real vs predicted iteration time and
   time to target -> OUT/table.md.

Everything is printed with the machine's load average at the time, since the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STRATEGIES = ("no_failure", "checkfree", "checkfree_plus", "checkpoint", "redundant", "checkfree_adam",
              "neighbour_copy", "gemini", "adaptive")


def _spec(args, strategy, knobs):
    from simulator.experiments import sweep_preset
    from simulator.real import RealRunSpec

    preset = sweep_preset("quick")
    cfg = dict(preset.trainer_config, total_iters=args.iterations)
    return RealRunSpec(strategy=strategy, failure_rate=0.0 if strategy == "no_failure" else args.rate, seed=args.seed,
                       iterations=args.iterations, trainer_config=cfg, strategy_knobs=knobs,
                       eval_every=preset.eval_every, eval_batches=preset.eval_batches, schedule=preset.schedule,
                       target_loss=preset.target_loss, max_steps_factor=preset.max_steps_factor,
                       mid_iteration=args.mid_iteration, spares=2)


def _knobs(cluster, cfg) -> dict:
    from simulator.experiments import sweep_preset
    from simulator.schedule import simulate_iteration
    from trainer.api import TrainerConfig
    from trainer.distributed.stage_runtime import flat_numel, stage_module
    from trainer.strategies.planned import ring_neighbours

    preset = sweep_preset("quick")
    config = TrainerConfig(**cfg)
    n = config.n_stages
    full = [4 * (flat_numel(stage_module(config, s), "full") - 2) for s in range(n + 1)]  # parameters + Adam
    copy_s = sum(cluster.transfer_s(s, h, full[s]) for s in range(n + 1) for h in ring_neighbours(s, n))
    knobs = dict(preset.strategy_knobs)
    knobs["adaptive"] = {"copy_s": copy_s, "iteration_s": simulate_iteration(cluster, 4, schedule="gpipe").iteration_s}
    knobs["gemini"] = {"interval": knobs.get("checkpoint", {}).get("interval", 10)}
    return knobs


def main(argv: list[str] | None = None) -> int:
    from simulator.calibrate import calibrate
    from simulator.cluster import Cluster, LinkSpec
    from simulator.experiments import sweep_preset
    from simulator.real import run_real
    from simulator.real_cli import write_json_atomic
    from simulator.reprice import reprice, schedule_hooks
    from simulator.run import run_one

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--strategies", nargs="+", default=list(STRATEGIES))
    p.add_argument("--rate", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--iterations", type=int, default=200)
    p.add_argument("--mid-iteration", action="store_true")
    p.add_argument("--phase", choices=["real", "predict", "all"], default="all")
    p.add_argument("--full-simulation", nargs="*", default=[], help="also run_one these strategies (slow)")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = dict(sweep_preset("quick").trainer_config, total_iters=args.iterations)
    cal_path = out / "calibration.json"
    if cal_path.exists():
        cluster = Cluster.from_dict(json.loads(cal_path.read_text()))
    else:
        t0 = time.perf_counter()
        cluster = calibrate(cfg, out / "calibration-run", iterations=30, progress=lambda m: print(m, flush=True))
        write_json_atomic(cal_path, cluster.to_dict())
        print(f"calibrated in {time.perf_counter() - t0:.1f} s (load {os.getloadavg()[0]:.1f})", flush=True)
    knobs = _knobs(cluster, cfg)
    if args.phase in ("real", "all"):
        for strategy in args.strategies:
            path = out / f"{strategy}.json"
            if path.exists():
                continue
            t0 = time.perf_counter()
            load0 = os.getloadavg()[0]
            rec = run_real(_spec(args, strategy, knobs), out / f"{strategy}-run", log_path=out / f"{strategy}.jsonl")
            rec["loadavg"] = [load0, os.getloadavg()[0]]
            write_json_atomic(path, rec)
            print(f"{strategy}: {time.perf_counter() - t0:.0f} s wall, iteration {rec['iteration_s']:.3f} s, "
                  f"{rec['failures']} killed, target at {rec['time_to_target_s']} s, load {load0:.1f}", flush=True)
    if args.phase in ("predict", "all"):
        rows = []
        for strategy in args.strategies:
            path = out / f"{strategy}.json"
            if not path.exists():
                continue
            real = json.loads(path.read_text())
            delay = real["host"]["message_delay_s"]
            cluster_run = replace(cluster, host_load=float(real["host"]["load"]),
                                  update_s=statistics.median(real["measured"]["commit_s"]),
                                  default_link=LinkSpec(cluster.default_link.latency_s if delay is None else delay,
                                                        cluster.default_link.bytes_per_s))
            how = dict(schedule_hooks(strategy, knobs.get(strategy, {}), cluster.n_stages), knobs_from_this_cluster=True)
            apriori = reprice(real, cluster, **how)
            sim = reprice(real, cluster_run, **how)
            sim["sim_time_s"], apriori["sim_time_s"] = sim["rows"][-1][1], apriori["rows"][-1][1]
            if strategy in args.full_simulation:
                full = run_one(_spec(args, strategy, knobs).simulated(cluster_run))
                write_json_atomic(out / f"{strategy}.simulated.json", full)
                assert [r["train_loss"] for r in full["rows"]] == [r["train_loss"] for r in real["rows"]]
                assert abs(full["sim_time_s"] - sim["sim_time_s"]) <= 1e-9 * full["sim_time_s"], strategy
            rows.append((strategy, real, apriori, sim))
        text = _table(rows, cluster, args)
        (out / "table.md").write_text(text)
        print(text)
    return 0


def _ratio(a, b) -> str:
    return "-" if a is None or b is None or not b else f"{a / b:.3f}"


def _table(rows, cluster, args) -> str:
    lines = [f"Real runs vs the simulator on `local-real` (quick model, 4 stages + embedding stage = 5 processes, "
             f"rate {args.rate:g} per stage per iteration{', mid-iteration' if args.mid_iteration else ''}, seed "
             f"{args.seed}). *A priori*: the calibration alone (host load {cluster.host_load:.2f} on "
             f"{cluster.host_cores:g} cores, link latency {1e3 * cluster.default_link.latency_s:.2f} ms, "
             f"commit {1e3 * cluster.update_s:.1f} ms). *Run's host*: the same with the host as the run's own "
             f"operations measured it (CPU share -> load, message delay to a waiting process -> link latency, "
             f"commit phase). Ratios are real / predicted.", "",
             "| strategy | killed | real iteration s (median, mean) | a priori | ratio (mean) | run's host: load, delay ms | "
             "predicted | ratio (mean) | real time to target s | a priori | ratio | run's host | ratio | wall s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for strategy, real, apriori, sim in rows:
        rt, at, st = real["time_to_target_s"], apriori["time_to_target_s"], sim["time_to_target_s"]
        delay = real["host"]["message_delay_s"]
        mean = real.get("iteration_mean_s", real["iteration_s"])
        lines.append(
            f"| {strategy} | {real['failures']} | {real['iteration_s']:.3f}, {mean:.3f} | {apriori['iteration_s']:.3f} | "
            f"{_ratio(mean, apriori['iteration_s'])} | {real['host']['load']:.2f}, "
            f"{'-' if delay is None else f'{1e3 * delay:.2f}'} | {sim['iteration_s']:.3f} | "
            f"{_ratio(mean, sim['iteration_s'])} | {'-' if rt is None else f'{rt:.2f}'} | "
            f"{'-' if at is None else f'{at:.2f}'} | {_ratio(rt, at)} | {'-' if st is None else f'{st:.2f}'} | "
            f"{_ratio(rt, st)} | {real['wall_s']:.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
