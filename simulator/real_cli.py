"""``shardproof train`` (a real multi-process run) and ``shardproof calibrate`` (the `local-real` preset).

    shardproof train --strategy NAME [--stages S] [--failure-rate R] [--seed N] [--out DIR]
                     [--mid-iteration] [--failable-embedding] [--spares K] [common flags]
    shardproof calibrate --out FILE [--stages S] [--iterations N] [--spares K] [--preset quick|paper]

`train` runs one OS process per pipeline stage (trainer.distributed), kills them with SIGKILL on
the simulator's failure schedule and recovers with the strategy's planner; it writes
``OUT/real.jsonl`` (one line per committed iteration, as it happens) and ``OUT/real.json`` (the
whole record, written atomically at the end) and prints the evaluations and failures.
`calibrate` measures this machine for the configuration (simulator/calibrate.py) and writes the
cluster JSON that ``simulate run|sweep --cluster local-real --calibration FILE`` reads.

Exit codes (as ``simulate``): 0 success, 2 usage, 3 bad input (unknown strategy, bad rate or
trace, missing data), 4 the real run failed (a stage process reported an error or a wait timed
out: `trainer.distributed.DistributedError`), 130 interrupted; every stage process is stopped on
every exit path.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from simulator.errors import SimulationError

__all__ = ["add_train_parser", "add_calibrate_parser", "train_command", "calibrate_command", "write_json_atomic",
           "event_counts"]


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to a temporary file next to `path`, fsync, rename: a kill leaves the old or the new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True, allow_nan=False)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _trainer_config(args: argparse.Namespace, preset: Any) -> dict[str, Any]:
    cfg = dict(preset.trainer_config)
    if args.stages is not None:
        if args.stages < 2:
            raise SimulationError(f"--stages must be >= 2, got {args.stages}")
        cfg["n_stages"] = args.stages
    if args.data is not None:
        if not Path(args.data).exists():
            raise SimulationError(f"--data {args.data}: no such file or folder")
        cfg["data"] = str(Path(args.data).resolve())
    return cfg


def event_counts(kinds: list[str]) -> str:
    """A row's events, each kind once in first-seen order with its count when above 1:
    ``["Restart", "Transfer", "Transfer", "Transfer"]`` -> ``"Restart Transfer x3"``; ``"-"`` for
    none (a cell read "Transfer Transfer ..." up to ~14 times: new-user trial 53, item F)."""
    counts: dict[str, int] = {}
    for k in kinds:
        counts[k] = counts.get(k, 0) + 1
    return " ".join(k if n == 1 else f"{k} x{n}" for k, n in counts.items()) or "-"


def add_train_parser(subparsers: Any) -> None:
    """Register ``shardproof train``."""
    from simulator.cli import _workload_args

    from simulator.cli import _Formatter, _strategies_epilog

    p = subparsers.add_parser("train", help="a real run: one process per stage, SIGKILL failures",
                              formatter_class=_Formatter, epilog=_strategies_epilog())
    _workload_args(p)
    p.add_argument("--strategy", required=True, help="a strategy name (listed below; required)")
    p.add_argument("--stages", type=int, default=None,
                   help="transformer stages S (processes: S + 1; default: the preset's, quick: 4)")
    p.add_argument("--failure-rate", type=float, default=0.0,
                   help="failures per stage per iteration (bernoulli: in [0, 1)) or per stage-hour "
                        "(hourly); a failure SIGKILLs the stage's process")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the failure schedule and of the trainer (initialisation, data "
                        "order)")
    p.add_argument("--spares", type=int, default=2, help="warm standby processes")
    p.add_argument("--out", default=None,
                   help="OUT/real.jsonl (incremental) and OUT/real.json (default: a new temporary "
                        "folder)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=train_command)


def add_calibrate_parser(subparsers: Any) -> None:
    """Register ``shardproof calibrate``."""
    p = subparsers.add_parser("calibrate", help="measure the local-real cluster preset on this machine")
    p.add_argument("--out", required=True, help="cluster JSON to write")
    p.add_argument("--preset", choices=["quick", "paper"], default="quick")
    p.add_argument("--stages", type=int, default=None)
    p.add_argument("--data", default=None)
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--schedule", choices=["gpipe", "1f1b"], default="gpipe")
    p.add_argument("--spares", type=int, default=2)
    p.set_defaults(func=calibrate_command)


def _real_spec(args: argparse.Namespace):
    from simulator.cli import _validate_grid
    from simulator.experiments import sweep_preset
    from simulator.real import RealRunSpec
    from simulator.run import load_backend

    preset = sweep_preset(args.preset)
    cfg = _trainer_config(args, preset)
    _validate_grid(load_backend(None), [args.strategy], [args.failure_rate], args.failure_model, args.trace,
                   cfg.get("n_stages", 4) + 1)
    for flag, value in (("--iterations", args.iterations), ("--eval-every", args.eval_every)):
        if value is not None and value < 1:
            raise SimulationError(f"{flag} must be >= 1, got {value}")
    if args.spares < 0:
        raise SimulationError(f"--spares must be >= 0, got {args.spares}")
    iterations = args.iterations or preset.iterations
    cfg.setdefault("total_iters", iterations)
    return RealRunSpec(
        strategy=args.strategy, failure_rate=args.failure_rate, seed=args.seed, iterations=iterations,
        trainer_config=cfg, strategy_knobs=preset.strategy_knobs, failure_model=args.failure_model, trace=args.trace,
        trace_time_scale=args.trace_time_scale, eval_every=args.eval_every or preset.eval_every,
        eval_batches=preset.eval_batches, schedule=args.schedule or preset.schedule,
        target_loss=args.target_loss if args.target_loss is not None else preset.target_loss,
        max_steps_factor=preset.max_steps_factor, mid_iteration=args.mid_iteration,
        failable_embedding=args.failable_embedding, spares=args.spares)


def train_command(args: argparse.Namespace) -> int:
    """``shardproof train``."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from simulator.real import run_real

    console = Console(soft_wrap=False, width=max(150, Console().width))
    spec = _real_spec(args)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="shardproof-train-"))
    out.mkdir(parents=True, exist_ok=True)
    log = out / "real.jsonl"
    log.unlink(missing_ok=True)
    with Progress(TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.description}"), console=Console(stderr=True), disable=args.no_progress) as bar:
        task = bar.add_task("starting stage processes", total=spec.iterations)

        def on_row(row: dict[str, Any]) -> None:
            note = f"failed {row['failures']}" if row.get("failures") else ""
            bar.update(task, completed=row["iteration"], description=note)

        rec = run_real(spec, out / "run", log_path=log, on_row=on_row)
    write_json_atomic(out / "real.json", rec)
    t = Table(title=f"real run: {spec.strategy} rate={spec.failure_rate:g} seed={spec.seed}, "
                    f"{spec.trainer_config.get('n_stages', 4) + 1} processes")
    for col in ("training s", "iteration", "train loss", "val loss", "killed", "events"):
        t.add_column(col, justify="right")
    for row in rec["rows"]:
        if row["val_loss"] is None and not row["failures"]:
            continue
        kinds = [e["action"] for e in row["events"] if e["action"] != "Measured"]
        t.add_row(f"{row['time_s']:.2f}", str(row["iteration"]),
                  "-" if row["train_loss"] is None else f"{row['train_loss']:.3f}",
                  "-" if row["val_loss"] is None else f"{row['val_loss']:.3f}",
                  ",".join(map(str, row["failures"])) or "-", event_counts(kinds))
    console.print(t)
    ttt = rec["time_to_target_s"]
    console.print(f"iteration {rec['iteration_s']:.4g} s (median, real), {rec['failures']} stages killed, "
                  f"{rec['ignored_failures']} ignored (immune), time to target {spec.target_loss}: "
                  f"{'not reached' if ttt is None else f'{ttt:.2f} s'}; training {rec['training_s']:.1f} s, "
                  f"wall {rec['wall_s']:.1f} s (start-up {rec['startup_s']:.1f} s); log {log}")
    return 0


def calibrate_command(args: argparse.Namespace) -> int:
    """``shardproof calibrate``."""
    import sys

    from simulator.calibrate import calibrate
    from simulator.experiments import sweep_preset

    preset = sweep_preset(args.preset)
    args.data = getattr(args, "data", None)
    cfg = _trainer_config(args, preset)
    if args.iterations < 10:
        raise SimulationError(f"--iterations must be >= 10 for a calibration, got {args.iterations}")
    out = Path(args.out)
    with tempfile.TemporaryDirectory(prefix="shardproof-calibrate-") as work:
        cluster = calibrate(cfg, Path(work), iterations=args.iterations, schedule=args.schedule, spares=args.spares,
                            progress=lambda msg: print(msg, file=sys.stderr))
    write_json_atomic(out, cluster.to_dict())
    print(f"local-real cluster for {cfg.get('n_stages', 4)} stages written to {out}")
    return 0
