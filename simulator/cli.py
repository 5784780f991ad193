"""The ``shardproof`` command line: ``shardproof simulate run|sweep|summarize ...``,
``shardproof train``, ``shardproof calibrate``, ``shardproof --version``.

``main()`` builds one argparse parser with a subcommand per tool; each subcommand registers
itself with an ``add_*_parser(subparsers)`` function and runs through its own function. Proving
is the separate console scripts ``prove`` and ``check-certificate`` (``proofs/cli.py``).

Exit codes: 0 success; 3 bad input — `SimulationError`, `TrainerError` (incl.
`StrategyError`): unknown strategy, failure rate outside [0, 1), zero or negative counts, bad or
missing trace, corrupt results file, missing data; 4 a real run (``shardproof train``) failed —
`DistributedError`. Errors print one line ``shardproof: error: ...`` on stderr. Argparse usage
errors exit 2 as usual; Ctrl-C and SIGTERM exit 130 / 143 after the sweep stopped its workers.
``train`` and ``calibrate`` live in simulator/real_cli.py.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
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


def _interval(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or 'auto', got {text!r}") from None


def _knob(text: str) -> tuple[str, str, Any]:
    """``strategy.field=value``; the value is JSON (numbers, true/false, strings in quotes) or a bare word."""
    name, eq, raw = text.partition("=")
    strategy, dot, fld = name.partition(".")
    if not eq or not dot or not strategy or not fld:
        raise argparse.ArgumentTypeError(f"expected STRATEGY.FIELD=VALUE, got {text!r}")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return strategy, fld, value


def _flatten(lists: Sequence[Sequence[Any]] | None) -> list[Any] | None:
    return None if lists is None else [x for xs in lists for x in xs]


def _strategies_epilog() -> str:
    """The strategies and the presets, for the help of ``simulate run|sweep`` and ``train``."""
    from simulator.experiments import SWEEP_PRESETS, sweep_preset

    try:
        from trainer.strategies import STRATEGIES

        strategies = ", ".join(STRATEGIES)
    except ImportError:  # pragma: no cover - the trainer ships with the package
        strategies = "(trainer not importable)"
    presets = "\n".join(f"  {name:<11} {sweep_preset(name).summary}" for name in SWEEP_PRESETS)
    return (f"strategies: {strategies} (docs/trainer.md)\n"
            f"presets (flags override their fields):\n{presets}")


def _epilog() -> str:
    from simulator.presets import CLUSTER_PRESETS

    return (_strategies_epilog() + f"\nclusters: {', '.join(CLUSTER_PRESETS)} (local-real: with "
            f"--calibration)")


class _Formatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Help with each flag's default, shown only when there is one to show: a flag whose default
    is None or False (the preset's value, or off) says so in its own help instead of printing
    ``(default: None)`` (new-user trial 53, item D)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        d = action.default
        if d is None or d is False or d == [] or d == argparse.SUPPRESS or "(default" in text \
                or "default:" in text:
            return text
        return super()._get_help_string(action)


def _workload_args(p: argparse.ArgumentParser) -> None:
    """Flags shared by simulated and real runs: model, data, length, schedule, failures."""
    from simulator.experiments import SWEEP_PRESETS

    p.add_argument("--preset", choices=list(SWEEP_PRESETS), default="quick",
                   help="defaults for model, iterations, rates, target, cluster (flags override)")
    p.add_argument("--data", default=None, help="text file or folder to train on (default: Shakespeare)")
    p.add_argument("--iterations", type=int, default=None,
                   help="training iterations to complete (default: the preset's)")
    p.add_argument("--target-loss", type=float, default=None,
                   help="validation loss target, nats/token (default: the preset's)")
    p.add_argument("--eval-every", type=int, default=None,
                   help="iterations between evaluations (default: the preset's)")
    p.add_argument("--schedule", choices=["gpipe", "1f1b"], default=None,
                   help="pipeline schedule (default: the preset's)")
    p.add_argument("--failure-model", choices=["bernoulli", "hourly", "trace", "bamboo"], default="bernoulli",
                   help="rates are per stage per iteration (bernoulli) or per stage-hour (hourly)")
    p.add_argument("--trace", default=None,
                   help="failure trace: JSON [{time_s, stage}] or Bamboo CSV (with --failure-model "
                        "trace / bamboo)")
    p.add_argument("--trace-time-scale", type=float, default=1.0, help="Bamboo trace time multiplier")
    p.add_argument("--mid-iteration", action="store_true",
                   help="failures land inside the iteration (its work so far is lost), not at its boundary")
    p.add_argument("--failable-embedding", action="store_true", help="the embedding stage 0 fails like the others")


def _common_args(p: argparse.ArgumentParser) -> None:
    from simulator.presets import CLUSTER_PRESETS

    _workload_args(p)
    p.add_argument("--cluster", choices=list(CLUSTER_PRESETS), default=None,
                   help="cluster model (default: the preset's): measured here, CheckFree's geo-distributed "
                        "500M setup priced with the 500M model's bytes, or calibrated on real stage processes "
                        "here (with --calibration)")
    p.add_argument("--calibration", default=None,
                   help="local-real: the cluster JSON of `shardproof calibrate` (measured now and written there "
                        "when missing)")
    p.add_argument("--checkpoint-interval", type=_interval, default=None,
                   help="checkpoint every N wall iterations, or 'auto' (Young/Daly from the save "
                        "cost and rate); default: the preset's (quick: 10)")
    p.add_argument("--redundant-overhead", type=float, default=None,
                   help="impose a measured redundant-computation slowdown, e.g. 1.65 (the CheckFree paper's "
                        "151.04 s / 91.35 s); default: the preset's, else the Bamboo event model")
    p.add_argument("--lr-scale", type=float, default=None,
                   help="LR multiplier of a stage rebuilt by checkfree / checkfree_plus (default: "
                        "1.1; the paper's 500M: 1.2)")
    p.add_argument("--knob", type=_knob, action="append", default=[], metavar="STRATEGY.FIELD=VALUE",
                   help="any strategy Config field, e.g. checkfree_plus.replica_sync=blocking (repeatable)")
    p.add_argument("--stop-at-target", action=argparse.BooleanOptionalAction, default=None,
                   help="end each run at its first evaluation at or below the target (default: "
                        "the preset's)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per run (per pool worker)")
    p.add_argument("--backend", default=None, help=argparse.SUPPRESS)  # tests: module:attr of a fake trainer


def add_simulate_parser(subparsers: Any) -> None:
    """Register ``simulate run``, ``simulate sweep`` and ``simulate summarize``."""
    sim = subparsers.add_parser("simulate", help="failure simulation of pipeline training")
    sim.set_defaults(func=simulate)
    sub = sim.add_subparsers(dest="simulate_command", required=True)

    run = sub.add_parser("run", help="one run: strategy x failure schedule x seed", formatter_class=_Formatter,
                         epilog=_epilog())
    _common_args(run)
    run.add_argument("--strategy", required=True, help="a strategy name (listed below; required)")
    run.add_argument("--failure-rate", type=float, default=0.0,
                     help="failures per stage per iteration (bernoulli: in [0, 1)) or per "
                          "stage-hour (hourly)")
    run.add_argument("--seed", type=int, default=0,
                     help="seed of the failure schedule and of the trainer (initialisation, data "
                          "order)")
    run.add_argument("--out", default=None, help="write OUT/run.jsonl (the full log)")

    sw = sub.add_parser("sweep", help="strategies x failure rates x seeds, resumable", formatter_class=_Formatter,
                        epilog=_epilog())
    _common_args(sw)
    sw.add_argument("--strategies", type=_names, nargs="+", default=None,
                    help="strategy names, space or comma separated (default: the preset's)")
    sw.add_argument("--failure-rates", type=_floats, nargs="+", default=None,
                    help="failure rates (default: the preset's)")
    sw.add_argument("--seeds", type=_ints, nargs="+", default=None,
                    help="seeds (default: the preset's)")
    sw.add_argument("--executor", choices=["local", "ray"], default="local",
                    help="where runs execute: a local process pool, or a Ray cluster")
    sw.add_argument("--jobs", type=int, default=2, help="parallel runs (process pool size)")
    sw.add_argument("--out", required=True, help="results directory (runs.jsonl, summary.csv, PNGs)")
    sw.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines")
    sw.add_argument("--dry-run", action="store_true", help="print the sweep's size and cost estimate, run nothing")

    sm = sub.add_parser("summarize", help="re-summarise the finished runs of a sweep directory",
                        formatter_class=_Formatter)
    sm.add_argument("dir", help="a sweep's --out directory (its runs.jsonl)")
    sm.add_argument("--target", type=float, default=None,
                    help="another validation loss target; time to target is recomputed from the logged rows "
                         "(default: the sweep's own)")
    sm.add_argument("--regime", action="store_true",
                    help="also print the dimensionless quantities beside the CheckFree paper's (docs/fidelity.md)")


def _positive(what: str, value: int) -> int:
    if not isinstance(value, int) or value < 1:
        raise SimulationError(f"{what} must be an integer >= 1, got {value}")
    return value


def _check_counts(args: argparse.Namespace, preset: Any) -> tuple[int, int]:
    """Reject zero and negative counts before anything is loaded; returns (iterations, eval_every)."""
    iterations = _positive("--iterations", args.iterations if args.iterations is not None else preset.iterations)
    eval_every = _positive("--eval-every", args.eval_every if args.eval_every is not None else preset.eval_every)
    _positive("--threads", args.threads)
    if getattr(args, "jobs", None) is not None:
        _positive("--jobs", args.jobs)
    if isinstance(args.checkpoint_interval, int) and args.checkpoint_interval < 1:
        raise SimulationError(f"--checkpoint-interval must be an integer >= 1 or 'auto', got {args.checkpoint_interval}")
    if args.redundant_overhead is not None and not args.redundant_overhead >= 1.0:
        raise SimulationError(f"--redundant-overhead must be a factor >= 1, got {args.redundant_overhead}")
    if args.lr_scale is not None and not args.lr_scale > 0:
        raise SimulationError(f"--lr-scale must be > 0, got {args.lr_scale}")
    return iterations, eval_every


def _load_cluster(path: Path):
    from simulator.cluster import Cluster

    try:
        return Cluster.from_dict(json.loads(path.read_text()))
    except ValueError as exc:
        raise SimulationError(f"{path}: not a cluster description ({exc})") from None


def _strategy_knobs(args: argparse.Namespace, preset: Any) -> dict[str, dict[str, Any]]:
    knobs = {k: dict(v) for k, v in preset.strategy_knobs.items()}
    if args.checkpoint_interval is not None:
        knobs.setdefault("checkpoint", {})["interval"] = args.checkpoint_interval
    if args.lr_scale is not None:
        for name in ("checkfree", "checkfree_plus"):
            knobs.setdefault(name, {})["lr_scale"] = args.lr_scale
    for strategy, fld, value in args.knob:
        knobs.setdefault(strategy, {})[fld] = value
    return knobs


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
    iterations, eval_every = _check_counts(args, preset)
    if cluster_name == "paper-geo":
        cfg["n_stages"] = 6  # the paper's 6 transformer stages (plus the embedding stage)
        cfg.setdefault("n_micro_batches", 6)  # CheckFree trainer.py send_mbs
    backend = load_backend(args.backend)
    if cluster_name == "paper-geo":
        cluster = paper_geo_cluster()
    elif cluster_name == "local-real":
        cluster = _local_real(args, cfg)
    elif cluster_file is not None and cluster_file.exists():
        cluster = _load_cluster(cluster_file)  # a resumed sweep keeps the cluster it measured
    else:
        trainer = backend.make_trainer(dict(cfg, seed=0))  # fails early on missing data
        cluster = local_cluster(trainer, 5, n_micro_batches=cfg.get("n_micro_batches", 4))
        del trainer
        if cluster_file is not None:
            cluster_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = cluster_file.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(cluster.to_dict(), indent=1, sort_keys=True) + "\n")
            os.replace(tmp, cluster_file)  # atomic: a kill leaves the old file or the new one
    cfg.setdefault("total_iters", iterations)
    stop = args.stop_at_target if args.stop_at_target is not None else preset.stop_at_target
    return RunSpec(
        strategy=strategy, failure_rate=rate, seed=seed, iterations=iterations, cluster=cluster,
        trainer_config=cfg, strategy_knobs=_strategy_knobs(args, preset), failure_model=args.failure_model,
        trace=args.trace, trace_time_scale=args.trace_time_scale,
        eval_every=eval_every, eval_batches=preset.eval_batches,
        schedule=args.schedule or preset.schedule,
        target_loss=args.target_loss if args.target_loss is not None else preset.target_loss,
        mid_iteration=args.mid_iteration, failable_embedding=args.failable_embedding,
        max_steps_factor=preset.max_steps_factor, backend=args.backend,
        redundant_overhead=args.redundant_overhead if args.redundant_overhead is not None
        else preset.redundant_overhead,
        stop_at_target=bool(stop), jump_eval_batches=preset.jump_eval_batches,
        action_time_scale=preset.action_time_scale,
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


def _n_stages(args: argparse.Namespace, preset: Any) -> int:
    return 7 if (args.cluster or preset.cluster) == "paper-geo" else preset.trainer_config.get("n_stages", 4) + 1


def _set_threads(threads: int) -> None:
    from simulator.sweep import _init_worker

    _init_worker(_positive("--threads", threads))  # as every sweep worker runs


def _run_command(args: argparse.Namespace, console: Any) -> int:
    from rich.table import Table

    from simulator.experiments import sweep_preset
    from simulator.run import load_backend, run_one

    preset = sweep_preset(args.preset)
    _check_counts(args, preset)
    _set_threads(args.threads)
    if args.seed < 0:
        raise SimulationError(f"--seed must be >= 0, got {args.seed}")
    # validate the cheap arguments before measuring the cluster (which trains a few steps)
    _validate_grid(load_backend(args.backend), [args.strategy], [args.failure_rate],
                   args.failure_model, args.trace, _n_stages(args, preset))
    base, backend = _build_base(args, preset, args.strategy, args.failure_rate, args.seed)
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
    console.print(f"iteration {rec['iteration_s']:.4g} s (simulated), {rec['failures_acted_on']} failures acted on, "
                  f"{rec['failures_ignored']} ignored, time to target {base.target_loss}: "
                  f"{'not reached' if ttt is None else f'{ttt / per:.2f} {unit}'}; wall {rec['wall_s']:.1f} s, "
                  f"simulator {100 * rec['simulator_s'] / rec['wall_s']:.2f} %")
    why = ignored_line(rec)
    if why:
        console.print(why, highlight=False, markup=False, soft_wrap=True)
    if args.out:
        from simulator.sweep import append_result

        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        append_result(out / "run.jsonl", rec)
    return 0


def ignored_line(rec: dict[str, Any]) -> str | None:
    """Why a run ignored failures (None when it ignored none): the stages whose failures were
    ignored, with counts, and the strategy's own account of its immune stages (its
    ``describe()`` entries that say "ignored"), e.g. plain CheckFree's outer stages 1 and S,
    which have one neighbour each, so averaging cannot rebuild them (docs/simulator.md, "Why
    CheckFree ignores ..."; new-user trial 53, item E)."""
    counts: dict[int, int] = {}
    for row in rec.get("rows", ()):
        for st in row.get("failures_ignored") or ():
            counts[st] = counts.get(st, 0) + 1
    if not counts:
        return None
    stages = ", ".join(f"{st} (x{n})" for st, n in sorted(counts.items()))
    desc = rec.get("strategy") or {}
    reasons = "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in desc.items()
                        if isinstance(v, str) and "ignored" in v
                        and (0 in counts if "embedding" in k else set(counts) - {0}))
    return (f"ignored failures of stages {stages}: {reasons or 'the strategy is immune to them'}; "
            f"docs/simulator.md#why-checkfree-ignores-outer-stage-failures")


def _sweep_command(args: argparse.Namespace, console: Any) -> int:
    from rich.console import Console

    from simulator.experiments import dry_run_report, sweep_preset
    from simulator.report import write_outputs
    from simulator.run import load_backend
    from simulator.sweep import SweepSpec, run_sweep

    preset = sweep_preset(args.preset)
    strategies = _flatten(args.strategies) or list(preset.strategies)
    rates = _flatten(args.failure_rates) or list(preset.failure_rates)
    seeds = _flatten(args.seeds) or list(preset.seeds)
    _check_counts(args, preset)
    backend = load_backend(args.backend)
    _validate_grid(backend, strategies, rates, args.failure_model, args.trace, _n_stages(args, preset))
    if any(s < 0 for s in seeds):
        raise SimulationError(f"seeds must be >= 0, got {seeds}")
    if args.dry_run:
        console.print(dry_run_report(args.preset, strategies, rates, seeds, args.iterations))
        return 0
    _set_threads(args.threads)
    base, _ = _build_base(args, preset, strategies[0], rates[0], seeds[0], Path(args.out) / "cluster.json")
    sweep = SweepSpec(strategies=tuple(strategies), failure_rates=tuple(rates), seeds=tuple(seeds), base=base)
    out = Path(args.out)
    t0 = time.perf_counter()
    records = run_sweep(sweep, out, executor=args.executor, max_workers=args.jobs, progress=not args.no_progress,
                        console=Console(stderr=True), threads=args.threads)
    wanted = {s.key() for s in sweep.runs()}
    records = [r for r in records if (r["key"]["strategy"], float(r["key"]["failure_rate"]),
                                      int(r["key"]["seed"])) in wanted]
    write_outputs(records, out, base.target_loss, console.print)
    console.print(f"{len(records)} runs in {out} (summary.csv, loss_vs_time.png, time_to_target.png); "
                  f"this invocation took {time.perf_counter() - t0:.1f} s wall")
    return 0


def _summarize_command(args: argparse.Namespace, console: Any) -> int:
    from simulator.report import write_outputs
    from simulator.stats import retarget
    from simulator.sweep import RESULTS_FILE, read_results

    out = Path(args.dir)
    path = out / RESULTS_FILE
    if not path.exists():
        raise SimulationError(f"{path}: no such results file (is {out} a sweep's --out directory?)")
    records = read_results(path)
    if not records:
        raise SimulationError(f"{path}: no finished runs")
    target = args.target
    if target is not None:
        records = retarget(records, target)
    else:
        target = records[0].get("target_loss")
    write_outputs(records, out, target, console.print)
    if args.regime:
        from simulator.regime import orderings_markdown, regime_markdown, reproduction_markdown

        knobs = records[0].get("spec", {}).get("strategy_knobs", {}).get("checkpoint", {})
        interval = knobs.get("interval") if isinstance(knobs.get("interval"), int) else None
        print("\n".join(["Time to target relative to the failure-free run and to checkpointing (paired per seed):",
                         reproduction_markdown(records), "", "The paper's orderings, paired per seed:",
                         orderings_markdown(records), "", "The dimensionless quantities:",
                         regime_markdown(records, interval)]))
    console.print(f"{len(records)} runs summarised from {path} (summary.csv and plots rewritten)")
    return 0


def simulate(args: argparse.Namespace) -> int:
    """``shardproof simulate run|sweep|summarize``."""
    from rich.console import Console

    console = Console(soft_wrap=False, width=max(150, Console().width))
    if args.simulate_command == "run":
        return _run_command(args, console)
    if args.simulate_command == "summarize":
        return _summarize_command(args, console)
    return _sweep_command(args, console)


def package_version() -> str:
    """The installed ``shardproof`` distribution's version (``importlib.metadata``); in a source
    checkout that is not installed, ``pyproject.toml``'s ``project.version`` beside the package
    (``"unknown"`` if neither is there). ``proofs/cli.py`` has the same lookup for ``prove``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("shardproof")
    except PackageNotFoundError:
        import tomllib

        try:
            with open(Path(__file__).resolve().parents[1] / "pyproject.toml", "rb") as f:
                return str(tomllib.load(f)["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"{PROG} {package_version()}",
                        help="print the command's name and shardproof's version, and exit 0")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_simulate_parser(subparsers)
    from simulator.real_cli import add_calibrate_parser, add_train_parser

    add_train_parser(subparsers)
    add_calibrate_parser(subparsers)
    # the description names exactly the subcommands registered above (issue 12); proving is
    # the separate console scripts ``prove`` and ``check-certificate`` (docs/cli.md)
    parser.description = (f"shardproof: failure simulation and real runs of pipeline training.\n"
                          f"commands: {', '.join(subparsers.choices)}\n"
                          f"To prove a plan, use the separate commands `prove PLAN.py` and "
                          f"`check-certificate CERT.json` (docs/cli.md).")
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"{PROG}: warning: {message}", file=sys.stderr)


def _terminate(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds through the sweep, which stops its workers


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``shardproof`` console script; returns the exit code."""
    from trainer.distributed.launcher import DistributedError
    from trainer.errors import TrainerError

    args = build_parser().parse_args(argv)
    warnings.showwarning = _show_warning
    previous = signal.signal(signal.SIGTERM, _terminate)
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
    except SystemExit as exc:
        if exc.code == 128 + signal.SIGTERM:
            print(f"{PROG}: terminated; rerun the same command to resume", file=sys.stderr)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
