"""Statistics of a sweep: paired ratios per seed, bootstrap confidence intervals (issue 15).

Every strategy of a sweep meets the same failure draws for a seed (failure schedules are seeded
from (seed, rate) only, simulator/failures.py), so strategies are compared *paired*: for each
seed the ratio of a strategy's time to target to checkpointing's (same seed, same rate) and to
the failure-free run's (same seed), then the mean of those ratios over seeds with a bootstrap
95 % confidence interval. A paired ratio removes the seed-to-seed variation both runs share
(data order, initial weights), which the unpaired mean ± std of times does not.

Bootstrap: the percentile interval of the mean (Efron & Tibshirani, "An Introduction to the
Bootstrap", 1993, section 13.3): resample the per-seed values with replacement ``n_resamples``
times from a `numpy.random.Generator` seeded by the caller (reproducible), take the 2.5 and 97.5
percentiles of the resampled means (``inverted_cdf``: no interpolation, so an infinite value
stays infinite instead of turning into NaN). With 5 seeds the interval is a rough one: the
percentile bootstrap under-covers at small n; it is still the honest summary of what was run.

Not reached: a run that never reaches the target has time ``inf``; its ratio to a run that did
is ``inf`` (or 0 the other way round), and a pair where neither reached is dropped. A mean over
values containing ``inf`` is ``inf``.

`retarget` recomputes every time-to-target figure of finished runs from their logged rows for
another target loss (``shardproof simulate summarize DIR --target L``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Interval", "Summary", "bootstrap_mean", "paired_ratios", "summarize", "retarget", "record_key",
           "STRATEGY_ORDER"]

STRATEGY_ORDER = ("no_failure", "checkfree", "checkfree_plus", "checkpoint", "redundant")
NO_FAILURE = "no_failure"
N_RESAMPLES = 10_000


@dataclass(frozen=True)
class Interval:
    """A mean over seeds with its bootstrap 95 % interval; ``n`` values went in."""

    mean: float
    lo: float
    hi: float
    n: int

    def excludes(self, x: float) -> bool:
        """True when the whole interval lies on one side of ``x`` (e.g. 1.0 for a ratio)."""
        return (self.lo > x or self.hi < x) and self.n >= 2


def bootstrap_mean(values: Sequence[float], *, level: float = 0.95, n_resamples: int = N_RESAMPLES,
                   seed: int = 0) -> Interval:
    """Mean of ``values`` and its percentile-bootstrap interval (module docstring).

    NaN values are dropped. No values: all NaN. One value: the interval is that value's point
    (lo = hi = mean) and `Interval.excludes` is False (n < 2).
    """
    x = np.asarray([v for v in values if not math.isnan(v)], dtype=np.float64)
    if x.size == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    mean = float(np.inf) if np.isinf(x).any() else float(x.mean())
    if x.size == 1:
        return Interval(mean, mean, mean, 1)
    rng = np.random.default_rng(np.random.SeedSequence([seed, x.size]))
    idx = rng.integers(0, x.size, size=(n_resamples, x.size))
    with np.errstate(invalid="ignore"):
        means = x[idx].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.percentile(means, [100 * alpha, 100 * (1 - alpha)], method="inverted_cdf")
    return Interval(mean, float(lo), float(hi), int(x.size))


def record_key(rec: dict[str, Any]) -> tuple[str, float, int]:
    k = rec["key"]
    return (k["strategy"], float(k["failure_rate"]), int(k["seed"]))


def _ttt(rec: dict[str, Any]) -> float:
    v = rec.get("time_to_target_s")
    return math.inf if v is None else float(v)


def _ratio(a: float, b: float) -> float:
    if math.isinf(a) and math.isinf(b):
        return math.nan  # neither reached: no information about the ratio
    if math.isinf(a):
        return math.inf
    if math.isinf(b):
        return 0.0
    if b == 0:
        return 1.0 if a == 0 else math.inf
    return a / b


def paired_ratios(records: Sequence[dict[str, Any]], strategy: str, rate: float, reference: str) -> dict[int, float]:
    """Per seed: time to target of ``strategy`` at ``rate`` / that of ``reference`` (same seed).

    The reference runs at the same rate, except `no_failure`, which runs once per seed at rate 0.
    Seeds missing on either side are left out.
    """
    by = {record_key(r): r for r in records}
    ref_rate = 0.0 if reference == NO_FAILURE else rate
    out = {}
    for (s, r, seed), rec in by.items():
        if s != strategy or r != rate:
            continue
        ref = by.get((reference, ref_rate, seed))
        if ref is not None:
            out[seed] = _ratio(_ttt(rec), _ttt(ref))
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class Summary:
    """One (strategy, rate) over seeds: times in simulated s (inf = not reached), ratios paired."""

    strategy: str
    failure_rate: float
    seeds: int
    reached: int
    mean_s: float
    std_s: float
    speedup_vs_checkpoint: float | None  # checkpoint mean / this mean (> 1: faster), unpaired
    mean_iteration_s: float
    mean_failures: float
    mean_wall_s: float
    times_s: tuple[float, ...] = field(default=())
    time_ci: Interval | None = None  # time to target, mean and bootstrap interval
    vs_checkpoint: Interval | None = None  # paired ratio this / checkpointing (< 1: faster)
    vs_failure_free: Interval | None = None  # paired ratio this / no_failure
    iterations_to_target: Interval | None = None  # completed iterations at the target
    steps_to_target: Interval | None = None  # iterations run (redone ones included) at the target
    mean_failures_acted: float = math.nan
    mean_failures_ignored: float = math.nan
    tokens_per_s: Interval | None = None  # progress tokens (modelled model) per simulated second


def _mean_std(xs: Sequence[float]) -> tuple[float, float]:
    if not xs:
        return math.nan, math.nan
    if any(math.isinf(x) for x in xs):
        return math.inf, math.nan
    m = sum(xs) / len(xs)
    return m, (math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0)


def _throughput(rec: dict[str, Any]) -> float:
    """Tokens of kept progress per simulated second: iterations done x tokens / simulated time."""
    sim = float(rec.get("sim_time_s") or 0.0)
    tokens = float(rec.get("tokens_per_iteration") or 0.0)
    return rec.get("iterations_done", 0) * tokens / sim if sim > 0 and tokens > 0 else math.nan


def _unpaired_speedup(ck_mean: float, mean: float) -> float | None:
    if math.isfinite(ck_mean) and math.isfinite(mean):
        return ck_mean / mean if mean > 0 else (1.0 if ck_mean == 0 else math.inf)
    if math.isinf(ck_mean) and math.isfinite(mean):
        return math.inf  # reached where checkpointing did not
    if math.isfinite(ck_mean):
        return 0.0  # checkpointing reached the target, this strategy did not
    return None


def summarize(records: Sequence[dict[str, Any]], *, seed: int = 0) -> list[Summary]:
    """Group runs by (strategy, rate); paired ratios and bootstrap intervals over seeds."""
    groups: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for r in records:
        k = record_key(r)
        groups.setdefault((k[0], k[1]), []).append(r)
    order = {n: i for i, n in enumerate(STRATEGY_ORDER)}
    ck_means = {rate: _mean_std([_ttt(r) for r in runs])[0] for (s, rate), runs in groups.items() if s == "checkpoint"}
    out = []
    for (strategy, rate), runs in sorted(groups.items(), key=lambda kv: (kv[0][1], order.get(kv[0][0], 99), kv[0][0])):
        runs = sorted(runs, key=record_key)
        times = tuple(_ttt(r) for r in runs)
        mean, std = _mean_std(times)
        n = len(runs)
        speedup = None
        if rate in ck_means and strategy != "checkpoint":
            speedup = _unpaired_speedup(ck_means[rate], mean)

        def interval(values: Sequence[float]) -> Interval:
            return bootstrap_mean(values, seed=seed)

        def opt(name: str) -> list[float]:
            return [math.inf if r.get(name) is None else float(r[name]) for r in runs]

        vs_ck = paired_ratios(records, strategy, rate, "checkpoint") if strategy not in ("checkpoint", NO_FAILURE) else {}
        vs_ff = paired_ratios(records, strategy, rate, NO_FAILURE) if strategy != NO_FAILURE else {}
        out.append(Summary(
            strategy, rate, n, sum(math.isfinite(t) for t in times), mean, std, speedup,
            sum(float(r.get("iteration_s") or 0.0) for r in runs) / n,
            sum(r.get("failures", 0) for r in runs) / n, sum(r.get("wall_s", 0.0) for r in runs) / n, times,
            time_ci=interval(times),
            vs_checkpoint=interval(list(vs_ck.values())) if vs_ck else None,
            vs_failure_free=interval(list(vs_ff.values())) if vs_ff else None,
            iterations_to_target=interval(opt("iterations_to_target")),
            steps_to_target=interval(opt("steps_to_target")),
            mean_failures_acted=_mean_or_nan([r.get("failures_acted_on") for r in runs]),
            mean_failures_ignored=_mean_or_nan([r.get("failures_ignored") for r in runs]),
            tokens_per_s=interval([_throughput(r) for r in runs]),
        ))
    return out


def _mean_or_nan(xs: Sequence[Any]) -> float:
    vals = [float(x) for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else math.nan


def retarget(records: Sequence[dict[str, Any]], target: float) -> list[dict[str, Any]]:
    """Copies of ``records`` with time / iterations / steps to ``target`` recomputed from their rows.

    A run that stopped at its own, higher target (``spec.stop_at_target``) cannot show a lower
    one: it counts as not reached, with a warning.
    """
    out, censored = [], 0
    for rec in records:
        hit = next((row for row in rec.get("rows", []) if row.get("val_loss") is not None
                    and row["val_loss"] <= target), None)
        spec = rec.get("spec", {})
        own = rec.get("target_loss")
        if hit is None and spec.get("stop_at_target") and own is not None and target < own:
            censored += 1
        out.append({**rec, "target_loss": target,
                    "time_to_target_s": None if hit is None else float(hit["sim_time_s"]),
                    "iterations_to_target": None if hit is None else int(hit["iteration"]),
                    "steps_to_target": None if hit is None else int(hit["step"])})
    if censored:
        warnings.warn(f"{censored} runs stopped at their own target, above {target}; they count as not reached",
                      stacklevel=2)
    return out
