"""The ``shardproof`` command line: ``shardproof simulate run|sweep ...``.

``main()`` builds one argparse parser with a subcommand per tool; each subcommand registers
itself with an ``add_*_parser(subparsers)`` function and runs through its own function, so
``prove`` / ``bench`` can be added beside ``simulate`` later.

Exit codes: 0 success; 3 bad input — `SimulationError`, `TrainerError` (incl.
`StrategyError`): unknown strategy, failure rate outside [0, 1), bad or missing trace, corrupt
results file, missing data; 4 a real run (``shardproof train``) failed — `DistributedError`.
Errors print one line ``shardproof: error: ...`` on stderr. Argparse usage errors exit 2 as usual.
``train`` and ``calibrate`` live in simulator/real_cli.py.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simulator.errors import SimulationError

__all__ = ["main", "add_simulate_parser", "simulate"]

PROG = "shardproof"
EXIT_BAD_INPUT = 3
EXIT_RUN_FAILED = 4  # a real multi-process run could not go on (simulator/real_cli.py)


def _floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers, got {text!r}") from None


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers, got {text!r}") from None


def _names(text: str) -> list[str]:
    return [x for x in text.replace(",", " ").split() if x]


def _flatten(lists: Sequence[Sequence[Any]] | None) -> list[Any] | None:
    return None if lists is None else [x for xs in lists for x in xs]


def _workload_args(p: argparse.ArgumentParser) -> None:
    """Flags shared by simulated and real runs: model, data, length, schedule, failures."""
    p.add_argument("--preset", choices=["quick", "paper"], default="quick",
                   help="defaults for model, iterations, rates, target (flags override)")
    p.add_argument("--data", default=None, help="text file or folder to train on (default: Shakespeare)")
    p.add_argument("--iterations", type=int, default=None, help="training iterations to complete")
    p.add_argument("--target-loss", type=float, default=None, help="validation loss target (nats/token)")
    p.add_argument("--eval-every", type=int, default=None, help="iterations between validation evaluations")
    p.add_argument("--schedule", choices=["gpipe", "1f1b"], default=None, help="pipeline schedule")
    p.add_argument("--failure-model", choices=["bernoulli", "hourly", "trace", "bamboo"], default="bernoulli",
                   help="rates are per stage per iteration (bernoulli) or per stage-hour (hourly)")
    p.add_argument("--trace", default=None, help="failure trace: JSON [{time_s, stage}] or Bamboo CSV")
    p.add_argument("--trace-time-scale", type=float, default=1.0, help="Bamboo trace time multiplier")
    p.add_argument("--mid-iteration", action="store_true",
                   help="failures land inside the iteration (its work so far is lost), not at its boundary")
    p.add_argument("--failable-embedding", action="store_true", help="the embedding stage 0 fails like the others")


def _common_args(p: argparse.ArgumentParser) -> None:
    _workload_args(p)
    p.add_argument("--cluster", choices=["local", "paper-geo", "local-real"], default=None,
                   help="cluster model: measured on this machine, CheckFree's geo-distributed 500M setup, or "
                        "calibrated on real stage processes here (with --calibration)")
    p.add_argument("--calibration", default=None,
                   help="local-real: the cluster JSON of `shardproof calibrate` (measured now and written there "
                        "when missing)")
    p.add_argument("--backend", default=None, help=argparse.SUPPRESS)  # tests: module:attr of a fake trainer


def add_simulate_parser(subparsers: Any) -> None:
    """Register ``simulate run`` and ``simulate sweep``."""
    sim = subparsers.add_parser("simulate", help="failure simulation of pipeline training")
    sim.set_defaults(func=simulate)
    sub = sim.add_subparsers(dest="simulate_command", required=True)

    run = sub.add_parser("run", help="one run: strategy x failure schedule x seed")
    _common_args(run)
    run.add_argument("--strategy", required=True)
    run.add_argument("--failure-rate", type=float, default=0.0)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--out", default=None, help="write OUT/run.jsonl (the full log)")

    sw = sub.add_parser("sweep", help="strategies x failure rates x seeds, resumable")
    _common_args(sw)
    sw.add_argument("--strategies", type=_names, nargs="+", default=None)
    sw.add_argument("--failure-rates", type=_floats, nargs="+", default=None)
    sw.add_argument("--seeds", type=_ints, nargs="+", default=None)
    sw.add_argument("--executor", choices=["local", "ray"], default="local")
    sw.add_argument("--jobs", type=int, default=2, help="parallel runs (process pool size)")
    sw.add_argument("--out", required=True, help="results directory (runs.jsonl, summary.csv, PNGs)")
    sw.add_argument("--no-progress", action="store_true", help="no progress bar")


def _load_cluster(path: Path):
    from simulator.cluster import Cluster

    try:
        return Cluster.from_dict(json.loads(path.read_text()))
    except ValueError as exc:
        raise SimulationError(f"{path}: not a cluster description ({exc})") from None


def _local_real(args: argparse.Namespace, cfg: dict[str, Any]):
    """The calibrated cluster of --calibration, measured now (and written there) when the file is missing."""
    if not args.calibration:
        raise SimulationError("--cluster local-real needs --calibration FILE (written by `shardproof calibrate`)")
    path = Path(args.calibration)
    if path.exists():
        cluster = _load_cluster(path)
    else:
        import tempfile

        from simulator.calibrate import calibrate
        from simulator.real_cli import write_json_atomic

        print(f"{PROG}: calibrating local-real into {path}", file=sys.stderr)
        with tempfile.TemporaryDirectory(prefix="shardproof-calibrate-") as work:
            cluster = calibrate(cfg, Path(work))
        write_json_atomic(path, cluster.to_dict())
    if cluster.n_stages != cfg.get("n_stages", 4) + 1:
        raise SimulationError(f"{path}: calibrated for {cluster.n_stages - 1} stages, the run has "
                              f"{cfg.get('n_stages', 4)}")
    return cluster


def _build_base(args: argparse.Namespace, preset: Any, strategy: str, rate: float, seed: int,
                cluster_file: Path | None = None):
    """The RunSpec shared by the command's runs, with the cluster resolved."""
    from simulator.presets import local_cluster, paper_geo_cluster
    from simulator.run import RunSpec, load_backend

    cluster_name = args.cluster or preset.cluster
    cfg = dict(preset.trainer_config)
    if args.data is not None:
        if not Path(args.data).exists():
            raise SimulationError(f"--data {args.data}: no such file or folder")
        cfg["data"] = str(Path(args.data).resolve())
    if cluster_name == "paper-geo":
        cfg["n_stages"] = 6  # the paper's 6 transformer stages (plus the embedding stage)
        cfg["n_micro_batches"] = 6  # CheckFree trainer.py send_mbs: the schedule priced is the one trained
    backend = load_backend(args.backend)
    if cluster_name == "paper-geo":
        cluster = paper_geo_cluster()
        micro_batches = None
    elif cluster_name == "local-real":
        cluster = _local_real(args, cfg)
        micro_batches = None
    elif cluster_file is not None and cluster_file.exists():
        cluster = _load_cluster(cluster_file)  # a resumed sweep keeps the cluster it measured
        micro_batches = None
    else:
        from simulator.sweep import _init_worker

        _init_worker()  # measure with one torch thread, as every sweep worker runs
        trainer = backend.make_trainer(dict(cfg, seed=0))  # fails early on missing data
        cluster = local_cluster(trainer, 5, n_micro_batches=cfg.get("n_micro_batches", 4))
        micro_batches = None
        del trainer
        if cluster_file is not None:
            cluster_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = cluster_file.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(cluster.to_dict(), indent=1, sort_keys=True) + "\n")
            os.replace(tmp, cluster_file)  # atomic: a kill leaves the old file or the new one
    iterations = args.iterations or preset.iterations
    if iterations < 1:
        raise SimulationError(f"--iterations must be >= 1, got {iterations}")
    cfg.setdefault("total_iters", iterations)
    return RunSpec(
        strategy=strategy, failure_rate=rate, seed=seed, iterations=iterations, cluster=cluster,
        trainer_config=cfg, strategy_knobs=preset.strategy_knobs, failure_model=args.failure_model,
        trace=args.trace, trace_time_scale=args.trace_time_scale,
        eval_every=args.eval_every or preset.eval_every, eval_batches=preset.eval_batches,
        micro_batches=micro_batches, schedule=args.schedule or preset.schedule,
        target_loss=args.target_loss if args.target_loss is not None else preset.target_loss,
        mid_iteration=args.mid_iteration, failable_embedding=args.failable_embedding,
        max_steps_factor=preset.max_steps_factor, backend=args.backend,
    ), backend


def _validate_grid(backend: Any, strategies: Sequence[str], rates: Sequence[float], model: str,
                   trace: str | None, n_stages: int) -> None:
    from simulator.failures import make_failure_schedule

    known = list(backend.strategy_names())
    for s in strategies:
        if s not in known:
            raise SimulationError(f"unknown strategy {s!r}; known: {', '.join(known)}")
    for r in rates:
        make_failure_schedule(model, r, 0, n_stages, trace=trace)  # raises on a bad rate or trace


def _run_command(args: argparse.Namespace, console: Any) -> int:
    from rich.table import Table

    from simulator.experiments import sweep_preset
    from simulator.run import run_one

    from simulator.run import load_backend

    preset = sweep_preset(args.preset)
    # validate the cheap arguments before measuring the cluster (which trains a few steps)
    n_stages = 7 if (args.cluster or preset.cluster) == "paper-geo" else \
        preset.trainer_config.get("n_stages", 4) + 1
    _validate_grid(load_backend(args.backend), [args.strategy], [args.failure_rate],
                   args.failure_model, args.trace, n_stages)
    base, backend = _build_base(args, preset, args.strategy, args.failure_rate, args.seed)
    _validate_grid(backend, [args.strategy], [args.failure_rate], args.failure_model, args.trace,
                   base.cluster.n_stages)
    rec = run_one(base)
    t = Table(title=f"{args.strategy} rate={args.failure_rate:g} seed={args.seed} on {base.cluster.name}")
    # simulated time in hours for long (paper-scale) runs, in seconds for short ones
    last_s = max((row["sim_time_s"] for row in rec["rows"]), default=0.0)
    unit, per = ("h", 3600.0) if last_s >= 3600 else ("s", 1.0)
    for col in (f"sim {unit}", "iteration", "train loss", "val loss", "failed stages", "events"):
        t.add_column(col, justify="right")
    for row in rec["rows"]:
        if row["val_loss"] is None and not row["failures"]:
            continue
        t.add_row(f"{row['sim_time_s'] / per:.2f}", str(row["iteration"]),
                  "-" if row["train_loss"] is None else f"{row['train_loss']:.3f}",
                  "-" if row["val_loss"] is None else f"{row['val_loss']:.3f}",
                  ",".join(map(str, row["failures"])) or "-",
                  " ".join(e["action"] for e in row["strategy_events"]) or "-")
    console.print(t)
    ttt = rec["time_to_target_s"]
    console.print(f"iteration {rec['iteration_s']:.4g} s (simulated), {rec['failures']} failures, "
                  f"time to target {base.target_loss}: "
                  f"{'not reached' if ttt is None else f'{ttt / per:.2f} {unit}'}; wall {rec['wall_s']:.1f} s, "
                  f"simulator {100 * rec['simulator_s'] / rec['wall_s']:.2f} %")
    if args.out:
        from simulator.sweep import append_result

        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        append_result(out / "run.jsonl", rec)
    return 0


def _sweep_command(args: argparse.Namespace, console: Any) -> int:
    from rich.console import Console

    from simulator.experiments import sweep_preset
    from simulator.sweep import SweepSpec, run_sweep, write_outputs

    preset = sweep_preset(args.preset)
    strategies = _flatten(args.strategies) or list(preset.strategies)
    rates = _flatten(args.failure_rates) or list(preset.failure_rates)
    seeds = _flatten(args.seeds) or list(preset.seeds)
    from simulator.run import load_backend

    backend = load_backend(args.backend)
    n_stages = 7 if (args.cluster or preset.cluster) == "paper-geo" else preset.trainer_config.get("n_stages", 4) + 1
    _validate_grid(backend, strategies, rates, args.failure_model, args.trace, n_stages)
    if any(s < 0 for s in seeds):
        raise SimulationError(f"seeds must be >= 0, got {seeds}")
    base, _ = _build_base(args, preset, strategies[0], rates[0], seeds[0], Path(args.out) / "cluster.json")
    sweep = SweepSpec(strategies=tuple(strategies), failure_rates=tuple(rates), seeds=tuple(seeds), base=base)
    out = Path(args.out)
    t0 = time.perf_counter()
    records = run_sweep(sweep, out, executor=args.executor, max_workers=args.jobs, progress=not args.no_progress,
                        console=Console(stderr=True))
    wanted = {s.key() for s in sweep.runs()}
    records = [r for r in records if (r["key"]["strategy"], float(r["key"]["failure_rate"]),
                                      int(r["key"]["seed"])) in wanted]
    write_outputs(records, out, base.target_loss, console.print)
    console.print(f"{len(records)} runs in {out} (summary.csv, loss_vs_time.png, time_to_target.png); "
                  f"this invocation took {time.perf_counter() - t0:.1f} s wall")
    return 0


def simulate(args: argparse.Namespace) -> int:
    """``shardproof simulate run|sweep``."""
    from rich.console import Console

    console = Console(soft_wrap=False, width=max(150, Console().width))
    if args.simulate_command == "run":
        return _run_command(args, console)
    return _sweep_command(args, console)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="shardproof: prove plans, simulate failures")
    subparsers = parser.add_subparsers(dest="command", required=True)
    add_simulate_parser(subparsers)  # hook: add_prove_parser(subparsers), add_bench_parser(...) go here
    from simulator.real_cli import add_calibrate_parser, add_train_parser

    add_train_parser(subparsers)
    add_calibrate_parser(subparsers)
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"{PROG}: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``shardproof`` console script; returns the exit code."""
    from trainer.distributed.launcher import DistributedError
    from trainer.errors import TrainerError

    args = build_parser().parse_args(argv)
    warnings.showwarning = _show_warning
    try:
        return int(args.func(args) or 0)
    except DistributedError as exc:
        print(f"{PROG}: error: the real run failed: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_RUN_FAILED
    except (SimulationError, TrainerError) as exc:
        msg = " ".join(str(exc).split()) or type(exc).__name__
        print(f"{PROG}: error: {msg}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
