"""Plots of a sweep (matplotlib, Agg): loss vs simulated time with CI bands, time to target.

- ``loss_vs_time.png``: one panel per failure rate; per strategy the mean validation loss over
  seeds on a common time grid (each seed's curve is a step function: the last evaluation at or
  before t) with its bootstrap 95 % band (`simulator.stats.bootstrap_mean`, where >= 2 seeds
  still run), the failure-free reference dashed in every panel, the target as a labelled
  horizontal line, a legend on every panel and a title stating cluster, model, rates and seeds;
  with a target the y axis shows the last ``ZOOM_NATS`` above it, where the strategies differ.
- ``time_to_target.png``: mean time to target per strategy and rate with bootstrap 95 % error
  bars; "not reached" marked.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simulator.stats import NO_FAILURE, STRATEGY_ORDER, Summary, bootstrap_mean, record_key

__all__ = ["plot_loss_vs_time", "plot_time_to_target", "sweep_title", "time_unit", "COLORS"]

COLORS = {NO_FAILURE: "black", "checkfree": "tab:blue", "checkfree_plus": "tab:green",
          "checkpoint": "tab:red", "redundant": "tab:purple"}
# the other strategies (issue 16's), each its own colour, in the order they are first drawn
_MORE_COLORS = ("tab:orange", "tab:brown", "tab:pink", "tab:olive", "tab:cyan", "tab:gray")


def strategy_colors(strategies: Sequence[str]) -> dict[str, str]:
    """A colour per strategy: the paper's five fixed, the rest from ``_MORE_COLORS``."""
    out = {k: v for k, v in COLORS.items() if k in strategies}
    extra = [s for s in strategies if s not in COLORS]
    out.update({s: _MORE_COLORS[i % len(_MORE_COLORS)] for i, s in enumerate(extra)})
    return out
GRID_POINTS = 160
ZOOM_NATS = 0.8  # loss vs time shows the last 0.8 nats above the target
BAND_RESAMPLES = 2000


def time_unit(max_s: float) -> tuple[str, float]:
    """A readable unit for simulated times up to ``max_s``: (name, seconds per unit)."""
    if not math.isfinite(max_s) or max_s >= 2 * 3600:
        return "h", 3600.0
    if max_s >= 120:
        return "min", 60.0
    return "s", 1.0


def sweep_title(records: Sequence[dict[str, Any]]) -> str:
    """'cluster X, model Y, rates a/b/c, N seeds' from the records' specs."""
    if not records:
        return "no runs"
    spec = records[0].get("spec", {})
    cluster = spec.get("cluster", "?")
    model = records[0].get("model")
    cfg = spec.get("trainer_config", {})
    trained = (f"trained {cfg.get('n_stages', 4)}x{cfg.get('layers_per_stage', 1)} layers, "
               f"d {cfg.get('d_model', 64)}")
    rates = sorted({record_key(r)[1] for r in records if record_key(r)[0] != NO_FAILURE})
    seeds = sorted({record_key(r)[2] for r in records})
    priced = f"priced as {model}; " if model and model != "trained" else ""
    return (f"cluster {cluster} ({priced}{trained}); rates {'/'.join(f'{r:g}' for r in rates) or '-'} "
            f"per stage-iteration; {len(seeds)} seeds")


def _curve(rec: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    pts = [(row["sim_time_s"], row["val_loss"]) for row in rec["rows"] if row.get("val_loss") is not None]
    t, y = (np.asarray(v, dtype=np.float64) for v in zip(*pts)) if pts else (np.zeros(0), np.zeros(0))
    return t, y


def _step_at(t: np.ndarray, y: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The last evaluation at or before each grid time; NaN before the first and after the last."""
    idx = np.searchsorted(t, grid, side="right") - 1
    out = np.where(idx >= 0, y[np.clip(idx, 0, None)], np.nan)
    return np.where(grid <= t[-1], out, np.nan) if t.size else np.full(grid.shape, np.nan)


def _band(curves: list[tuple[np.ndarray, np.ndarray]], grid: np.ndarray):
    ys = np.vstack([_step_at(t, y, grid) for t, y in curves])  # (seeds, grid)
    mean = np.full(grid.shape, np.nan)
    lo, hi = mean.copy(), mean.copy()
    for j in range(grid.size):
        col = ys[:, j][~np.isnan(ys[:, j])]
        if col.size == 0:
            continue
        iv = bootstrap_mean(col.tolist(), n_resamples=BAND_RESAMPLES, seed=j)
        mean[j] = iv.mean
        if iv.n >= 2:
            lo[j], hi[j] = iv.lo, iv.hi
    return mean, lo, hi


def plot_loss_vs_time(records: Sequence[dict[str, Any]], path: Path, target: float | None = None,
                      title: str | None = None) -> None:
    """``loss_vs_time.png`` (module docstring)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = sorted({record_key(r)[1] for r in records if record_key(r)[0] != NO_FAILURE}) or [0.0]
    t_max = max((row["sim_time_s"] for r in records for row in r["rows"]), default=0.0)
    unit, per = time_unit(t_max)
    grid = np.linspace(0.0, t_max, GRID_POINTS) if t_max > 0 else np.zeros(1)
    fig, axes = plt.subplots(1, len(rates), figsize=(5.2 * len(rates), 4.4), squeeze=False, sharey=True)
    order = {n: i for i, n in enumerate(STRATEGY_ORDER)}
    strategies = sorted({record_key(r)[0] for r in records}, key=lambda s: (order.get(s, 99), s))
    colors = strategy_colors(strategies)
    lowest = math.inf
    for ax, rate in zip(axes[0], rates):
        for strategy in strategies:
            runs = [r for r in records if record_key(r)[0] == strategy
                    and (strategy == NO_FAILURE or record_key(r)[1] == rate)]
            curves = [c for c in map(_curve, runs) if c[0].size]
            if not curves:
                continue
            mean, lo, hi = _band(curves, grid)
            if np.isfinite(mean).any():
                lowest = min(lowest, float(np.nanmin(mean)))
            color = colors[strategy]
            ax.plot(grid / per, mean, color=color, lw=1.4, ls="--" if strategy == NO_FAILURE else "-",
                    label=f"{strategy} (n={len(curves)})")
            ax.fill_between(grid / per, lo, hi, color=color, alpha=0.18, lw=0)
        if target is not None:
            ax.axhline(target, color="grey", lw=0.9, ls=":")
            ax.annotate(f"target {target:g}", (0.99, target), xycoords=("axes fraction", "data"),
                        ha="right", va="bottom", fontsize=8, color="grey")
        ax.set_title(f"failure rate {rate:g} per stage-iteration", fontsize=9)
        ax.set_xlabel(f"simulated time ({unit})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
    if target is not None:  # the approach to the target is where strategies differ: zoom there
        axes[0][0].set_ylim(min(lowest, target) - 0.05, target + ZOOM_NATS)
    axes[0][0].set_ylabel("validation loss (nats/token), mean and 95 % CI")
    fig.suptitle(title or sweep_title(records), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_time_to_target(summaries: Sequence[Summary], path: Path, title: str | None = None) -> None:
    """``time_to_target.png``: bars of mean time to target, bootstrap 95 % error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = sorted({s.failure_rate for s in summaries if s.strategy != NO_FAILURE}) or [0.0]
    strategies = list(dict.fromkeys(s.strategy for s in summaries))
    by = {(s.strategy, s.failure_rate): s for s in summaries}
    unit, per = time_unit(max((s.mean_s for s in summaries if math.isfinite(s.mean_s)), default=math.inf))
    fig, ax = plt.subplots(figsize=(max(6, 2.4 * len(rates)), 4.2))
    width = 0.8 / max(1, len(strategies))
    colors = strategy_colors(strategies)
    for j, strategy in enumerate(strategies):
        for i, rate in enumerate(rates):
            s = by.get((strategy, 0.0 if strategy == NO_FAILURE else rate))
            if s is None:
                continue
            x = i + (j - (len(strategies) - 1) / 2) * width
            label = strategy if i == 0 else None
            if math.isfinite(s.mean_s):
                ci = s.time_ci
                err = None
                if ci is not None and ci.n >= 2 and math.isfinite(ci.hi):
                    err = [[(s.mean_s - ci.lo) / per], [(ci.hi - s.mean_s) / per]]
                ax.bar(x, s.mean_s / per, width, yerr=err, color=colors[strategy], capsize=3, label=label)
            else:
                ax.bar(x, 0, width, color=colors[strategy], label=label)
                ax.annotate("not\nreached", (x, 0), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(rates)), [f"{r:g}" for r in rates])
    ax.set_xlabel("failure rate (per stage-iteration)")
    ax.set_ylabel(f"time to target (simulated {unit}), mean and 95 % CI")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    if title:
        import textwrap

        ax.set_title("\n".join(textwrap.wrap(title, 95)), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
