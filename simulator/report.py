"""Outputs of a sweep: the rich table, ``summary.csv`` and the plots (`simulator.plots`).

Table and CSV carry, per (strategy, failure rate) over seeds (`simulator.stats.summarize`):
time to target (simulated, mean and bootstrap 95 % CI), the paired ratios to checkpointing and
to the failure-free run (mean of per-seed ratios and CI; < 1 is faster), iterations to target
(completed) and steps to target (run, redone ones included), failures acted on and ignored,
throughput (tokens of the modelled model's kept progress per simulated second), simulated
iteration time and wall seconds per run.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from simulator.plots import plot_loss_vs_time, plot_time_to_target, sweep_title, time_unit
from simulator.stats import NO_FAILURE, Interval, Summary, summarize

__all__ = ["summary_table", "write_summary_csv", "write_outputs", "format_interval"]


def format_interval(iv: Interval | None, per: float = 1.0, digits: int = 3) -> str:
    """'m [lo, hi]' (or 'm' with one value, '-' for none, 'not reached' for inf)."""
    if iv is None or iv.n == 0 or math.isnan(iv.mean):
        return "-"
    if math.isinf(iv.mean):
        return "not reached" if iv.n and math.isinf(iv.lo) else f"inf [{iv.lo / per:.{digits}g}, inf]"
    if iv.n < 2:
        return f"{iv.mean / per:.{digits}g}"
    return f"{iv.mean / per:.{digits}g} [{iv.lo / per:.{digits}g}, {iv.hi / per:.{digits}g}]"


def summary_table(summaries: Sequence[Summary], target: float | None, title: str | None = None) -> Any:
    """A rich Table of the summary (simulated s, min or h, whichever reads best)."""
    from rich.markup import escape
    from rich.table import Table

    finite = [s.mean_s for s in summaries if math.isfinite(s.mean_s)]
    unit, per = time_unit(max(finite, default=math.inf))
    t = Table(title=escape(f"time to validation loss <= {target} (simulated {unit}; mean [bootstrap 95 % CI] over "
                           f"seeds; / ckpt, / no failure: ratios paired per seed, < 1 is faster; iterations: "
                           f"completed iterations at the target)"), caption=escape(title or ""))
    for col in ("strategy", "rate", "reached", f"to target ({unit})", "/ ckpt", "/ no failure",
                "iterations", "failures acted/ignored", "tokens/s", "iteration s", "wall s"):
        t.add_column(col, justify="left" if col == "strategy" else "right", no_wrap=col == "strategy")
    for s in summaries:
        cells = (s.strategy, "any" if s.strategy == NO_FAILURE else f"{s.failure_rate:g}", f"{s.reached}/{s.seeds}",
                 format_interval(s.time_ci, per), format_interval(s.vs_checkpoint),
                 format_interval(s.vs_failure_free), format_interval(s.iterations_to_target, digits=4),
                 f"{_f(s.mean_failures_acted)}/{_f(s.mean_failures_ignored)}",
                 format_interval(s.tokens_per_s), f"{s.mean_iteration_s:.4g}", f"{s.mean_wall_s:.1f}")
        t.add_row(*map(escape, cells))
    return t


def _f(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.1f}"


CSV_COLUMNS = ["strategy", "failure_rate", "seeds", "reached", "mean_time_to_target_s", "std_time_to_target_s",
               "mean_time_to_target_h", "speedup_vs_checkpoint", "mean_iteration_s", "mean_failures", "mean_wall_s",
               "time_to_target_ci_lo_s", "time_to_target_ci_hi_s",
               "vs_checkpoint", "vs_checkpoint_ci_lo", "vs_checkpoint_ci_hi", "vs_checkpoint_n",
               "vs_failure_free", "vs_failure_free_ci_lo", "vs_failure_free_ci_hi", "vs_failure_free_n",
               "iterations_to_target", "iterations_to_target_ci_lo", "iterations_to_target_ci_hi",
               "steps_to_target", "failures_acted_on", "failures_ignored",
               "tokens_per_s", "tokens_per_s_ci_lo", "tokens_per_s_ci_hi"]


def _iv(iv: Interval | None, n: bool = False) -> list[str]:
    if iv is None:
        return ["", "", ""] + ([""] if n else [])
    return [_num(iv.mean), _num(iv.lo), _num(iv.hi)] + ([str(iv.n)] if n else [])


def write_summary_csv(summaries: Sequence[Summary], path: Path) -> None:
    """``summary.csv``: one row per (strategy, rate); 'inf' where the target was not reached."""
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for s in summaries:
            w.writerow([s.strategy, s.failure_rate, s.seeds, s.reached, _num(s.mean_s), _num(s.std_s),
                        _num(s.mean_s / 3600), "" if s.speedup_vs_checkpoint is None else _num(s.speedup_vs_checkpoint),
                        _num(s.mean_iteration_s), _num(s.mean_failures), _num(s.mean_wall_s),
                        *(_iv(s.time_ci)[1:]), *_iv(s.vs_checkpoint, n=True), *_iv(s.vs_failure_free, n=True),
                        *_iv(s.iterations_to_target), _num(s.steps_to_target.mean if s.steps_to_target else math.nan),
                        _num(s.mean_failures_acted), _num(s.mean_failures_ignored), *_iv(s.tokens_per_s)])
    os.replace(tmp, path)  # atomic: a reader sees the old file or the new one


def _num(x: float) -> str:
    return "inf" if math.isinf(x) else ("" if math.isnan(x) else f"{x:.6g}")


def write_outputs(records: Sequence[dict[str, Any]], out: Path, target: float | None,
                  print_fn: Callable[[Any], None] | None = None) -> list[Summary]:
    """summary.csv, loss_vs_time.png, time_to_target.png, and the rich table (through ``print_fn``)."""
    summaries = summarize(records)
    title = sweep_title(records)
    write_summary_csv(summaries, out / "summary.csv")
    plot_loss_vs_time(records, out / "loss_vs_time.png", target, title)
    plot_time_to_target(summaries, out / "time_to_target.png", title)
    if print_fn is not None:
        print_fn(summary_table(summaries, target, title))
    return summaries
