"""The dimensionless quantities that decide the CheckFree comparison, the paper's and a sweep's.

docs/fidelity.md section 2 gives the argument. Per failure rate:

- ``failures_per_stage``: stage failures per stage before the target, ``p N0`` (N0 = failure-free
  iterations to the target);
- ``damage_iters``: progress lost per acted-on recovery, in iterations: ``(N - N0) / failures``
  with N the wall iterations the strategy needed (for checkpointing: the rollbacks);
- ``lost_fraction``: the fraction of iterations lost to failures, ``1 - N0 / N`` (= failures per
  iteration x damage per failure: the slowdown is ``1 / (1 - lost_fraction)``);
- ``failures_per_interval``: stage failures per checkpoint interval, ``f k p``;
- ``jump`` (ours only): the validation loss jump right after a recovery (nats) and the same
  jump in iterations of failure-free progress at that point (jump / the failure-free slope);
- time costs relative to the iteration: restart stall, a CheckFree recovery, a checkpoint save
  per interval, the redundant iteration.

The paper's values come from docs/ANCHORS.md (Table 2 of arXiv 2506.15461): N0 = 10,000 and the
iterations to target of each strategy; its "training time" is iterations x iteration time
(355.13 h = 14.0k x 91.32 s), so stalls are not in it. CheckFree acts on the 4 middle stages (its
runs never rebuild the outer ones), CheckFree+ and checkpointing on all 6.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simulator.stats import Interval, bootstrap_mean, record_key

__all__ = ["PAPER", "PaperRow", "RegimeRow", "paper_regime", "measured_regime", "regime_markdown",
           "ORDERINGS", "orderings_markdown", "reproduction_markdown"]


@dataclass(frozen=True)
class PaperRow:
    """The paper's figures at one rate (docs/ANCHORS.md)."""

    label: str
    p: float
    iterations: dict[str, float]  # strategy -> iterations to target
    hours: dict[str, float]  # strategy -> training time (h)


PAPER_N0 = 10_000
PAPER_STAGES = 6
PAPER_CHECKPOINT_INTERVAL = 100
PAPER_ITERATION_S = 91.35
PAPER_RESTART_S = 30.0
PAPER = (
    PaperRow("5 %", 0.0009, {"checkfree": 14_500, "checkfree_plus": 14_000, "checkpoint": 22_000, "redundant": 10_000},
             {"checkfree": 367.81, "checkfree_plus": 355.13, "checkpoint": 558.23, "redundant": 419.56}),
    PaperRow("10 %", 0.002, {"checkfree": 16_000, "checkfree_plus": 14_500, "checkpoint": 24_500, "redundant": 10_000},
             {"checkfree": 405.87, "checkfree_plus": 367.81, "checkpoint": 621.67, "redundant": 419.56}),
    PaperRow("16 %", 0.004, {"checkfree": 22_000, "checkfree_plus": 18_000, "checkpoint": 24_800, "redundant": 10_000},
             {"checkfree": 562.96, "checkfree_plus": 460.6, "checkpoint": 634.35, "redundant": 419.56}),
)
ACTING_STAGES = {"checkfree": 4, "checkfree_plus": 6, "checkpoint": 6, "redundant": 6}
FAILING = ("checkfree", "checkfree_plus", "checkpoint")


def paper_regime() -> list[dict[str, Any]]:
    """The paper's dimensionless quantities per rate (module docstring)."""
    out = []
    for row in PAPER:
        q: dict[str, Any] = {"label": row.label, "p": row.p, "failures_per_stage": row.p * PAPER_N0,
                             "failures_per_interval": PAPER_CHECKPOINT_INTERVAL * PAPER_STAGES * row.p}
        for s in FAILING:
            n = row.iterations[s]
            failures = ACTING_STAGES[s] * row.p * n
            q[f"{s}_damage_iters"] = (n - PAPER_N0) / failures
            q[f"{s}_lost_fraction"] = 1 - PAPER_N0 / n
            q[f"{s}_failures"] = failures
        for s in ("checkfree", "checkfree_plus", "redundant"):
            q[f"{s}_vs_checkpoint"] = row.hours[s] / row.hours["checkpoint"]
            q[f"{s}_vs_failure_free"] = row.hours[s] / (PAPER_N0 * PAPER_ITERATION_S / 3600)
        q["checkpoint_vs_failure_free"] = row.hours["checkpoint"] / (PAPER_N0 * PAPER_ITERATION_S / 3600)
        out.append(q)
    return out


@dataclass(frozen=True)
class RegimeRow:
    """Ours at one rate: intervals over seeds."""

    p: float
    n0: Interval
    failures_per_stage: Interval
    damage_iters: dict[str, Interval]
    lost_fraction: dict[str, Interval]
    failures: dict[str, Interval]
    jump_nats: Interval
    jump_iters: Interval
    failures_per_interval: float | None
    shared_boundary: float  # fraction of stage failures that share their boundary with another failure
    replica_pairs: Interval  # redundant: stages lost with their replica holder, per run (re-initialised)


def _ff_slope(ff: dict[str, Any], iteration: int, window: int = 40) -> float:
    """-d(val loss)/d(iteration) of the failure-free run around ``iteration`` (least squares)."""
    pts = [(r["iteration"], r["val_loss"]) for r in ff["rows"] if r.get("val_loss") is not None
           and abs(r["iteration"] - iteration) <= window]
    if len(pts) < 3:
        return math.nan
    x, y = np.asarray(pts, dtype=np.float64).T
    return float(-np.polyfit(x, y, 1)[0])


def _acted_before(rec: dict[str, Any]) -> int:
    """Failures the strategy acted on up to its target (all of them when rows are not logged)."""
    rows = rec.get("rows")
    if not rows or not any("failures" in r for r in rows):
        return int(rec.get("failures_acted_on", 0))
    limit = rec["steps_to_target"]
    return sum(len(r.get("failures", [])) - len(r.get("failures_ignored", [])) for r in rows
               if r.get("step", 0) <= limit)


def measured_regime(records: Sequence[dict[str, Any]], checkpoint_interval: int | None = None) -> list[RegimeRow]:
    """Our quantities per rate from a sweep's records (``iterations_to_target`` of no_failure = N0)."""
    by = {record_key(r): r for r in records}
    ff = {seed: r for (s, _, seed), r in by.items() if s == "no_failure"}
    rates = sorted({rate for (s, rate, _) in by if s != "no_failure"})
    n_stages = max((len(r["failure_schedule"].get("failable", [])) for r in records
                    if "failure_schedule" in r), default=PAPER_STAGES) or PAPER_STAGES
    out = []
    for rate in rates:
        n0s, dmg, lost, fails = [], {s: [] for s in FAILING}, {s: [] for s in FAILING}, {s: [] for s in FAILING}
        jumps, jump_iters = [], []
        for seed, f in ff.items():
            n0 = f.get("steps_to_target")
            if n0 is None:
                continue
            n0s.append(float(n0))
            for s in FAILING:
                r = by.get((s, rate, seed))
                if r is None or r.get("steps_to_target") is None:
                    continue
                n, acted = float(r["steps_to_target"]), _acted_before(r)
                if n <= 0:
                    continue  # target met before any step: nothing was lost
                lost[s].append(1 - n0 / n)
                fails[s].append(float(acted))
                if acted:
                    dmg[s].append((n - n0) / acted)
            cf = by.get(("checkfree", rate, seed))
            for row in (cf or {}).get("rows", []):
                if "val_jump" in row:
                    before, after = row["val_jump"]
                    jumps.append(after - before)
                    slope = _ff_slope(f, row["iteration"])
                    if slope > 0:
                        jump_iters.append((after - before) / slope)
        shared, total, pairs = 0, 0, []
        for (s, r_rate, _), r in by.items():
            if r_rate != rate or s == "no_failure":
                continue
            for row in r.get("rows", []):
                f = row.get("failures", [])
                total += len(f)
                shared += len(f) if len(f) > 1 else 0
            if s == "redundant":
                pairs.append(float(sum(1 for row in r.get("rows", []) for st in row.get("failures", [])
                                       if st >= 2 and st - 1 in row["failures"])))
        n0 = bootstrap_mean(n0s)
        out.append(RegimeRow(
            p=rate, n0=n0, failures_per_stage=bootstrap_mean([rate * x for x in n0s]),
            damage_iters={s: bootstrap_mean(v) for s, v in dmg.items()},
            lost_fraction={s: bootstrap_mean(v) for s, v in lost.items()},
            failures={s: bootstrap_mean(v) for s, v in fails.items()},
            jump_nats=bootstrap_mean(jumps), jump_iters=bootstrap_mean(jump_iters),
            failures_per_interval=None if checkpoint_interval is None else checkpoint_interval * n_stages * rate,
            shared_boundary=shared / total if total else math.nan,
            replica_pairs=bootstrap_mean(pairs),
        ))
    return out


def _iv(iv: Interval, digits: int = 3) -> str:
    if iv.n == 0 or math.isnan(iv.mean):
        return "-"
    if iv.n < 2:
        return f"{iv.mean:.{digits}g}"
    return f"{iv.mean:.{digits}g} [{iv.lo:.{digits}g}, {iv.hi:.{digits}g}]"


def regime_markdown(records: Sequence[dict[str, Any]], checkpoint_interval: int | None = None) -> str:
    """A markdown table: the paper's quantities beside ours, rate by rate (rates in order)."""
    ours = measured_regime(records, checkpoint_interval)
    paper = paper_regime()
    lines = ["| quantity | " + " | ".join(f"paper {q['label']} (p {q['p']:g}) | ours p {r.p:g}"
                                          for q, r in zip(paper, ours)) + " |",
             "|---|" + "---|---|" * min(len(paper), len(ours))]

    def row(name: str, theirs: list[str], mine: list[str]) -> None:
        cells = [f"{a} | {b}" for a, b in zip(theirs, mine)]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")

    pairs = list(zip(paper, ours))
    row("failure-free iterations to target N0", [f"{PAPER_N0:,}" for _ in pairs], [_iv(r.n0) for _, r in pairs])
    row("stage failures per stage before target, p N0", [f"{q['failures_per_stage']:.3g}" for q, _ in pairs],
        [_iv(r.failures_per_stage) for _, r in pairs])
    for s, label in (("checkfree", "CheckFree"), ("checkfree_plus", "CheckFree+"), ("checkpoint", "checkpointing")):
        row(f"{label}: failures acted on before target", [f"{q[f'{s}_failures']:.0f}" for q, _ in pairs],
            [_iv(r.failures[s]) for _, r in pairs])
        row(f"{label}: iterations lost per failure, (N - N0) / failures",
            [f"{q[f'{s}_damage_iters']:.3g}" for q, _ in pairs], [_iv(r.damage_iters[s]) for _, r in pairs])
        row(f"{label}: damage per failure / N0", [f"{q[f'{s}_damage_iters'] / PAPER_N0:.2%}" for q, _ in pairs],
            [_pct(r.damage_iters[s], r.n0) for _, r in pairs])
        row(f"{label}: fraction of iterations lost, 1 - N0 / N", [f"{q[f'{s}_lost_fraction']:.3f}" for q, _ in pairs],
            [_iv(r.lost_fraction[s]) for _, r in pairs])
    row("CheckFree loss jump right after a recovery (nats)", ["not reported" for _ in pairs],
        [_iv(r.jump_nats) for _, r in pairs])
    row("... in iterations of failure-free progress there", ["not reported" for _ in pairs],
        [_iv(r.jump_iters) for _, r in pairs])
    row("stage failures per checkpoint interval, f k p", [f"{q['failures_per_interval']:.2f}" for q, _ in pairs],
        ["-" if r.failures_per_interval is None else f"{r.failures_per_interval:.2f}" for _, r in pairs])
    # not matched by a compressed run: failures per iteration grow c-fold, so more of them coincide
    row("failures sharing their boundary with another (expected 1 - (1-p)^5)",
        [f"{1 - (1 - q['p']) ** (PAPER_STAGES - 1):.1%}" for q, _ in pairs],
        [f"{r.shared_boundary:.1%} (expected {1 - (1 - r.p) ** (PAPER_STAGES - 1):.1%})" for _, r in pairs])
    row("redundant: stages lost with their replica holder per run (expected 5 p^2 N0)",
        [f"{5 * q['p'] ** 2 * PAPER_N0:.2f}" for q, _ in pairs],
        [f"{_iv(r.replica_pairs)} (expected {5 * r.p ** 2 * r.n0.mean:.2f})" if r.n0.n else "-" for _, r in pairs])
    return "\n".join(lines)


def _pct(d: Interval, n0: Interval) -> str:
    if d.n == 0 or n0.n == 0 or not n0.mean > 0:
        return "-"
    return f"{d.mean / n0.mean:.2%}"


# The paper's orderings (docs/ANCHORS.md, Table 2): (faster, slower) pairs by training time.
ORDERINGS = (("checkfree_plus", "checkfree"), ("checkfree", "checkpoint"), ("checkfree_plus", "checkpoint"),
             ("checkfree_plus", "redundant"), ("redundant", "checkpoint"))


def _paper_ratio(row: PaperRow, a: str, b: str) -> float:
    return row.hours[a] / row.hours[b]


def orderings_markdown(records: Sequence[dict[str, Any]]) -> str:
    """Paired ratios a / b per seed (mean and bootstrap 95 % CI) beside the paper's a / b, per rate.

    Verdict per cell: "holds" when the interval lies on the paper's side of 1, "reversed" when it
    lies on the other side, "tie" when it contains 1 (the seeds do not decide).
    """
    from simulator.stats import paired_ratios

    rates = sorted({record_key(r)[1] for r in records if record_key(r)[0] != "no_failure"})
    lines = ["| ratio (time to target) | " + " | ".join(f"paper {row.label} | ours p {rate:g}"
                                                         for row, rate in zip(PAPER, rates)) + " |",
             "|---|" + "---|---|" * min(len(PAPER), len(rates))]
    for a, b in ORDERINGS:
        cells = []
        for row, rate in zip(PAPER, rates):
            theirs = _paper_ratio(row, a, b)
            iv = bootstrap_mean(list(paired_ratios(records, a, rate, b).values()))
            if iv.n == 0:
                cells.append(f"{theirs:.3f} | -")
                continue
            side = theirs < 1
            verdict = "tie" if not iv.excludes(1.0) else ("holds" if (iv.hi < 1) == side else "reversed")
            cells.append(f"{theirs:.3f} | {_iv(iv)} {verdict}")
        lines.append(f"| {a} / {b} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def reproduction_markdown(records: Sequence[dict[str, Any]]) -> str:
    """Time to target relative to the failure-free run and to checkpointing, the paper's and ours."""
    from simulator.stats import summarize

    by = {(s.strategy, s.failure_rate): s for s in summarize(records)}
    rates = sorted({record_key(r)[1] for r in records if record_key(r)[0] != "no_failure"})
    lines = ["| strategy | " + " | ".join(f"paper {row.label} | ours p {rate:g}" for row, rate in zip(PAPER, rates))
             + " |", "|---|" + "---|---|" * min(len(PAPER), len(rates))]
    ff_h = PAPER_N0 * PAPER_ITERATION_S / 3600
    for s in ("checkfree", "checkfree_plus", "checkpoint", "redundant"):
        cells = []
        for row, rate in zip(PAPER, rates):
            mine = by.get((s, rate))
            cells.append(f"{row.hours[s] / ff_h:.2f} | " + ("-" if mine is None or mine.vs_failure_free is None
                                                           else _iv(mine.vs_failure_free)))
        lines.append(f"| {s} / failure-free | " + " | ".join(cells) + " |")
    for s in ("checkfree", "checkfree_plus", "redundant"):
        cells = []
        for row, rate in zip(PAPER, rates):
            mine = by.get((s, rate))
            cells.append(f"{row.hours[s] / row.hours['checkpoint']:.3f} | " + (
                "-" if mine is None or mine.vs_checkpoint is None else _iv(mine.vs_checkpoint)))
        lines.append(f"| {s} / checkpoint | " + " | ".join(cells) + " |")
    return "\n".join(lines)
