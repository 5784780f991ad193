"""Sweeps: strategies x failure rates x seeds, resumable, summarised as table, CSV and plots.

Runs go to a process pool (``executor="local"``: concurrent.futures, ``max_workers=2``) or
to Ray (``executor="ray"``, the optional extra ``pip install shardproof[ray]``; ray is
imported only then). The parent process is the only writer of ``OUT/runs.jsonl``: one JSON
line per finished run, appended with one ``write`` of the complete line, then ``flush`` and
``fsync``, so a kill loses at most the run in flight.

Resume: on start the file is read back; every finished ``(strategy, failure_rate, seed)``
key is skipped, never run twice. A corrupt *last* line (a kill mid-write) is dropped with a
warning and truncated away; a corrupt line anywhere else raises `SimulationError` naming
``file:line``. Lines of a different sweep configuration (another model, cluster, target...)
are refused rather than mixed.

``no_failure`` never fails, so it runs once per seed under rate 0 and serves as the
reference at every rate.

Outputs in OUT: ``runs.jsonl``, ``summary.csv``, ``loss_vs_time.png`` (validation loss vs
simulated hours, one panel per rate), ``time_to_target.png`` (mean time to target with std
error bars); `summary_table` renders the rich table.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import sys
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from simulator.cluster import Cluster
from simulator.errors import SimulationError
from simulator.run import NO_FAILURE, RunSpec, run_one

__all__ = [
    "EXECUTORS", "SweepSpec", "Summary", "read_results", "append_result", "run_sweep", "summarize",
    "summary_table", "write_summary_csv", "plot_loss_vs_time", "plot_time_to_target",
]

EXECUTORS = ("local", "ray")
RESULTS_FILE = "runs.jsonl"


@dataclass(frozen=True, kw_only=True)
class SweepSpec:
    """A grid of runs sharing one configuration (``base``'s strategy, rate and seed are unused)."""

    strategies: tuple[str, ...]
    failure_rates: tuple[float, ...]
    seeds: tuple[int, ...]
    base: RunSpec

    def runs(self) -> list[RunSpec]:
        """The grid's runs; ``no_failure`` only once per seed, at rate 0."""
        out, seen = [], set()
        for strategy in self.strategies:
            for rate in self.failure_rates:
                for seed in self.seeds:
                    r = 0.0 if strategy == NO_FAILURE else float(rate)
                    if (strategy, r, seed) in seen:
                        continue
                    seen.add((strategy, r, seed))
                    out.append(replace(self.base, strategy=strategy, failure_rate=r, seed=int(seed)))
        return out

    def config_sha256(self) -> str:
        """Hash of everything but the grid axes: runs of different configs must not mix."""
        spec = {k: v for k, v in asdict(self.base).items() if k not in ("strategy", "failure_rate", "seed")}
        spec["cluster"] = _cluster_identity(self.base.cluster)
        return hashlib.sha256(json.dumps(spec, sort_keys=True, default=repr).encode()).hexdigest()[:16]


def _cluster_identity(cluster: Cluster) -> dict[str, Any]:
    # The measured `local` preset differs run to run in its timings; its name and shape identify it.
    if cluster.name == "local":
        return {"name": "local", "n_stages": cluster.n_stages}
    return {k: v for k, v in asdict(cluster).items() if k != "sources"}


# -- results file -------------------------------------------------------------------------------

def read_results(path: Path) -> list[dict[str, Any]]:
    """Finished runs in ``path`` (missing file: none). Drops a corrupt last line with a warning."""
    if not path.exists():
        return []
    data = path.read_bytes()
    lines = data.split(b"\n")
    complete = data.endswith(b"\n")
    body, tail = (lines[:-1], b"") if complete else (lines[:-1], lines[-1])
    out, good_end = [], 0
    for i, raw in enumerate(body):
        try:
            rec = json.loads(raw)
            if not isinstance(rec, dict) or "key" not in rec:
                raise ValueError("not a run record")
        except ValueError:
            if i == len(body) - 1 and not tail:
                warnings.warn(f"{path}:{i + 1}: dropping corrupt last line (an interrupted write)", stacklevel=2)
                _truncate(path, good_end)
                return out
            raise SimulationError(f"{path}:{i + 1}: corrupt results line (not a run record); "
                                  "fix or delete the line to resume") from None
        out.append(rec)
        good_end += len(raw) + 1
    if tail:
        warnings.warn(f"{path}:{len(body) + 1}: dropping incomplete last line (an interrupted write)", stacklevel=2)
        _truncate(path, good_end)
    return out


def _truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(size)
        f.flush()
        os.fsync(f.fileno())


def append_result(path: Path, record: dict[str, Any]) -> None:
    """Append one run as one complete line: a single write, then flush and fsync."""
    line = (json.dumps(record, sort_keys=True, allow_nan=False) + "\n").encode()
    with open(path, "ab") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def _key(rec: dict[str, Any]) -> tuple[str, float, int]:
    k = rec["key"]
    return (k["strategy"], float(k["failure_rate"]), int(k["seed"]))


# -- executors ---------------------------------------------------------------------------------

def _init_worker() -> None:
    # Two workers on two cores: one intra-op thread each (read by torch at import).
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover - torch is a dependency
        pass


def _local_results(specs: Sequence[RunSpec], max_workers: int) -> Iterable[dict[str, Any]]:
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    ctx = mp.get_context("spawn")  # no fork of a process that may hold torch threads
    with ProcessPoolExecutor(max_workers=max_workers, mp_context=ctx, initializer=_init_worker) as pool:
        pending = {pool.submit(run_one, s) for s in specs}
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    yield fut.result()
        finally:
            for fut in pending:
                fut.cancel()


def _ray_results(specs: Sequence[RunSpec], max_workers: int) -> Iterable[dict[str, Any]]:
    try:
        import ray
    except ImportError:
        raise SimulationError("--executor ray needs ray: pip install 'shardproof[ray]'") from None
    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS"), include_dashboard=False, log_to_driver=False)
    remote = ray.remote(num_cpus=1)(run_one)
    pending = [remote.remote(s) for s in specs]
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        for ref in done:
            yield ray.get(ref)


def run_sweep(sweep: SweepSpec, out: Path, *, executor: str = "local", max_workers: int = 2,
              progress: bool = True, console: Any = None) -> list[dict[str, Any]]:
    """Run every missing run of ``sweep``, appending to ``out/runs.jsonl``; return all records."""
    if executor not in EXECUTORS:
        raise SimulationError(f"unknown executor {executor!r}; known: {', '.join(EXECUTORS)}")
    if max_workers < 1:
        raise SimulationError(f"max_workers must be >= 1, got {max_workers}")
    out.mkdir(parents=True, exist_ok=True)
    lock = _lock(out)  # one writer per results directory; released when the process ends
    try:
        return _run_sweep_locked(sweep, out, executor, max_workers, progress, console)
    finally:
        lock.close()


def _lock(out: Path):
    import fcntl

    f = open(out / ".lock", "w")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise SimulationError(f"{out}: another sweep is writing here (lock {out / '.lock'})") from None
    return f


def _run_sweep_locked(sweep: SweepSpec, out: Path, executor: str, max_workers: int, progress: bool,
                      console: Any) -> list[dict[str, Any]]:
    path = out / RESULTS_FILE
    sha = sweep.config_sha256()
    records = read_results(path)
    for i, rec in enumerate(records):
        if rec.get("config_sha256") != sha:
            raise SimulationError(f"{path}:{i + 1}: a run of another sweep configuration "
                                  f"({rec.get('config_sha256')} != {sha}); use another --out")
    done = {_key(r) for r in records}
    todo = [s for s in sweep.runs() if s.key() not in done]
    source = _ray_results if executor == "ray" else _local_results
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = console or Console(stderr=True)
    total = len(sweep.runs())
    with Progress(TextColumn("[bold]sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.description}"), console=console, disable=not progress) as bar:
        task = bar.add_task(f"{len(done)} resumed", total=total, completed=total - len(todo))
        if todo:
            for rec in source(todo, max_workers):
                rec["config_sha256"] = sha
                append_result(path, rec)
                records.append(rec)
                k = rec["key"]
                bar.update(task, advance=1, description=f"{k['strategy']} rate={k['failure_rate']} seed={k['seed']}")
    return records


# -- summary -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Summary:
    """Time to target per (strategy, rate) over seeds (seconds; inf = not reached)."""

    strategy: str
    failure_rate: float
    seeds: int
    reached: int
    mean_s: float
    std_s: float
    speedup_vs_checkpoint: float | None  # checkpoint mean / this mean (> 1: faster)
    mean_iteration_s: float
    mean_failures: float
    mean_wall_s: float
    times_s: tuple[float, ...] = field(default=())


def _mean_std(xs: Sequence[float]) -> tuple[float, float]:
    if not xs:
        return math.nan, math.nan
    if any(math.isinf(x) for x in xs):
        return math.inf, math.nan
    m = sum(xs) / len(xs)
    return m, (math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0)


def summarize(records: Sequence[dict[str, Any]]) -> list[Summary]:
    """Group runs by (strategy, rate); mean and sample std of time to target over seeds."""
    groups: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for r in records:
        k = _key(r)
        groups.setdefault((k[0], k[1]), []).append(r)
    raw = {}
    for (strategy, rate), runs in groups.items():
        times = tuple(math.inf if r["time_to_target_s"] is None else float(r["time_to_target_s"]) for r in runs)
        raw[(strategy, rate)] = (runs, times, *_mean_std(times))
    out = []
    order = {n: i for i, n in enumerate([NO_FAILURE, "checkfree", "checkfree_plus", "checkpoint", "redundant"])}
    for (strategy, rate), (runs, times, mean, std) in sorted(raw.items(), key=lambda kv: (
            kv[0][1], order.get(kv[0][0], 99), kv[0][0])):
        ck = raw.get(("checkpoint", rate))
        speedup = None
        if ck is not None and strategy != "checkpoint":
            if math.isfinite(ck[2]) and math.isfinite(mean):
                speedup = ck[2] / mean if mean > 0 else (1.0 if ck[2] == 0 else math.inf)
            elif math.isinf(ck[2]) and math.isfinite(mean):
                speedup = math.inf  # reached where checkpointing did not
            elif math.isfinite(ck[2]):
                speedup = 0.0  # checkpointing reached the target, this strategy did not
        n = len(runs)
        out.append(Summary(strategy, rate, n, sum(math.isfinite(t) for t in times), mean, std, speedup,
                           sum(float(r["iteration_s"] or 0.0) for r in runs) / n,
                           sum(r["failures"] for r in runs) / n, sum(r["wall_s"] for r in runs) / n, times))
    return out


def time_unit(max_s: float) -> tuple[str, float]:
    """A readable unit for simulated times up to ``max_s``: (name, seconds per unit)."""
    if not math.isfinite(max_s) or max_s >= 2 * 3600:
        return "h", 3600.0
    if max_s >= 120:
        return "min", 60.0
    return "s", 1.0


def _fmt_t(seconds: float, per_unit: float) -> str:
    if math.isinf(seconds):
        return "not reached"
    if math.isnan(seconds):
        return "-"
    return f"{seconds / per_unit:.3f}"


def summary_table(summaries: Sequence[Summary], target: float | None) -> Any:
    """A rich Table of the summary (simulated s, min or h, whichever reads best)."""
    from rich.table import Table

    finite = [s.mean_s for s in summaries if math.isfinite(s.mean_s)]
    unit, per = time_unit(max(finite, default=math.inf))
    t = Table(title=f"time to validation loss <= {target} (simulated {unit}, mean ± std over seeds)")
    for col in ("strategy", "failure rate", "reached", f"mean {unit}", f"std {unit}", "speedup vs checkpoint",
                "iteration s", "failures", "wall s"):
        t.add_column(col, justify="left" if col == "strategy" else "right")
    for s in summaries:
        sp = "-" if s.speedup_vs_checkpoint is None else (
            "inf" if math.isinf(s.speedup_vs_checkpoint) else f"{s.speedup_vs_checkpoint:.2f}x")
        t.add_row(s.strategy, "any" if s.strategy == NO_FAILURE else f"{s.failure_rate:g}",
                  f"{s.reached}/{s.seeds}", _fmt_t(s.mean_s, per), _fmt_t(s.std_s, per), sp, f"{s.mean_iteration_s:.3f}",
                  f"{s.mean_failures:.1f}", f"{s.mean_wall_s:.1f}")
    return t


def write_summary_csv(summaries: Sequence[Summary], path: Path) -> None:
    """``summary.csv``: one row per (strategy, rate); 'inf' where the target was not reached."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["strategy", "failure_rate", "seeds", "reached", "mean_time_to_target_s",
                    "std_time_to_target_s", "mean_time_to_target_h", "speedup_vs_checkpoint",
                    "mean_iteration_s", "mean_failures", "mean_wall_s"])
        for s in summaries:
            w.writerow([s.strategy, s.failure_rate, s.seeds, s.reached, _num(s.mean_s), _num(s.std_s),
                        _num(s.mean_s / 3600), "" if s.speedup_vs_checkpoint is None else _num(s.speedup_vs_checkpoint),
                        _num(s.mean_iteration_s), _num(s.mean_failures), _num(s.mean_wall_s)])


def _num(x: float) -> str:
    return "inf" if math.isinf(x) else ("" if math.isnan(x) else f"{x:.6g}")


_COLORS = {NO_FAILURE: "black", "checkfree": "tab:blue", "checkfree_plus": "tab:green",
           "checkpoint": "tab:red", "redundant": "tab:purple"}


def plot_loss_vs_time(records: Sequence[dict[str, Any]], path: Path, target: float | None = None) -> None:
    """Validation loss vs simulated time per strategy, one panel per failure rate (seeds thin)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = sorted({_key(r)[1] for r in records if _key(r)[0] != NO_FAILURE}) or [0.0]
    unit, per = time_unit(max((row["sim_time_s"] for r in records for row in r["rows"]), default=0.0))
    fig, axes = plt.subplots(1, len(rates), figsize=(5 * len(rates), 4), squeeze=False, sharey=True)
    for ax, rate in zip(axes[0], rates):
        labelled = set()
        for r in sorted(records, key=_key):
            strategy, r_rate, _ = _key(r)
            if r_rate != rate and strategy != NO_FAILURE:
                continue
            pts = [(row["sim_time_s"] / per, row["val_loss"]) for row in r["rows"] if row["val_loss"] is not None]
            if not pts:
                continue
            xs, ys = zip(*pts)
            ax.plot(xs, ys, color=_COLORS.get(strategy), alpha=0.8, lw=1.2,
                    ls="--" if strategy == NO_FAILURE else "-",
                    label=None if strategy in labelled else strategy)
            labelled.add(strategy)
        if target is not None:
            ax.axhline(target, color="grey", lw=0.8, ls=":")
        ax.set_title(f"failure rate {rate:g}")
        ax.set_xlabel(f"simulated time ({unit})")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("validation loss (nats/token)")
    axes[0][-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_time_to_target(summaries: Sequence[Summary], path: Path) -> None:
    """Bars of mean time to target per strategy, grouped by rate, std error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = sorted({s.failure_rate for s in summaries if s.strategy != NO_FAILURE}) or [0.0]
    strategies = list(dict.fromkeys(s.strategy for s in summaries))
    by = {(s.strategy, s.failure_rate): s for s in summaries}
    unit, per = time_unit(max((s.mean_s for s in summaries if math.isfinite(s.mean_s)), default=math.inf))
    fig, ax = plt.subplots(figsize=(max(6, 2.2 * len(rates)), 4))
    width = 0.8 / max(1, len(strategies))
    for j, strategy in enumerate(strategies):
        for i, rate in enumerate(rates):
            s = by.get((strategy, 0.0 if strategy == NO_FAILURE else rate))
            if s is None:
                continue
            x = i + (j - (len(strategies) - 1) / 2) * width
            if math.isfinite(s.mean_s):
                ax.bar(x, s.mean_s / per, width, yerr=(s.std_s / per if math.isfinite(s.std_s) else 0),
                       color=_COLORS.get(strategy), capsize=3, label=strategy if i == 0 else None)
            else:
                ax.bar(x, 0, width, color=_COLORS.get(strategy), label=strategy if i == 0 else None)
                ax.annotate("not\nreached", (x, 0), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(rates)), [f"{r:g}" for r in rates])
    ax.set_xlabel("failure rate")
    ax.set_ylabel(f"time to target (simulated {unit})")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(records: Sequence[dict[str, Any]], out: Path, target: float | None,
                  print_fn: Callable[[Any], None] | None = None) -> list[Summary]:
    """summary.csv, the two PNGs, and the rich table (through ``print_fn``)."""
    summaries = summarize(records)
    write_summary_csv(summaries, out / "summary.csv")
    plot_loss_vs_time(records, out / "loss_vs_time.png", target)
    plot_time_to_target(summaries, out / "time_to_target.png")
    if print_fn is not None:
        print_fn(summary_table(summaries, target))
    return summaries


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: shardproof simulate sweep ...")
