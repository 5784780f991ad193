"""Failure schedules: which stages lose their node at each iteration boundary.

A failure schedule is asked once per simulated step (including steps that redo iterations
after a rollback), at the iteration boundary before the step:

    stages = schedule.failures(step, now_s, iteration_s)

and returns the stages (sorted, without repeats) whose weights and optimizer state are lost
there. Every schedule that draws random numbers owns a ``numpy.random.Generator`` seeded from
``(seed, rate)`` only, never from the strategy, so for one seed every strategy meets the same
draws in the same order (docs/STYLE.md rule 18); nothing touches a global RNG.

- `BernoulliFailures`: each failable stage fails independently with probability ``p`` per
  iteration (CheckFree's 0.0009 / 0.002 / 0.004 / 0.01, docs/ANCHORS.md).
- `HourlyFailures`: each failable stage fails at ``rate_per_stage_hour``; converted with the
  simulated iteration time, ``p = 1 - exp(-rate * iteration_s / 3600)`` (a Poisson process
  observed at iteration boundaries). The same uniforms as `BernoulliFailures`, so slower
  strategies see proportionally more failures per iteration.
- `TraceFailures`: a JSON file ``[{"time_s": 12.5, "stage": 3}, ...]``: each entry fails that
  stage at the first iteration boundary at or after ``time_s`` simulated seconds.
- `BambooTraceFailures`: replay of Bamboo's EC2 spot traces (``time_ms,event,node`` CSV,
  uclasystem/bamboo:traces/p3-trace.csv): nodes are mapped to failable stages round-robin in
  the order of their first ``add``; each ``remove`` fails that node's stage at
  ``time_ms / 1000 * time_scale`` s. Same-minute bulk removals arrive together.

The embedding stage 0 does not fail by default: CheckFree's generator draws the failed stage
from 1..6 (gensyn-ai/CheckFree failure_generator.py ``randint(1, len(stages) - 1)``);
``failable=range(n_stages)`` (``--failable-embedding``) makes it fail like the others.

Where in the iteration a failure lands (issue 16): ``draw(step, now_s, iteration_s)`` returns a
`FailureDraw` of the stages and ``at_fraction``, 0 for the iteration boundary (every schedule
above). `MidIterationFailures` wraps a schedule and puts each failure event a uniform fraction of
the way into the iteration after its boundary, so the work done so far in that iteration is lost
(the simulator charges ``at_fraction * iteration_s``; the real run kills the process that late).
"""

from __future__ import annotations

import csv
import json
import math
import struct
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulator.errors import SimulationError

__all__ = [
    "FailureSchedule", "NoFailures", "BernoulliFailures", "HourlyFailures", "TraceFailures",
    "BambooTraceFailures", "TraceStats", "bamboo_trace_stats", "make_rng", "FAILURE_MODELS",
    "make_failure_schedule", "FailureDraw", "MidIterationFailures",
]

FAILURE_MODELS = ("bernoulli", "hourly", "trace", "bamboo")


def make_rng(seed: int, rate: float) -> np.random.Generator:
    """The Generator of a failure schedule, seeded from (seed, rate) only.

    The rate's IEEE-754 bits make the seed exact (no rounding of e.g. 0.0009).
    """
    if not isinstance(seed, int) or seed < 0:
        raise SimulationError(f"seed must be an int >= 0, got {seed!r}")
    bits = struct.unpack("<Q", struct.pack("<d", float(rate)))[0]
    return np.random.default_rng(np.random.SeedSequence([seed, bits]))


def _check_stages(stages: Sequence[int], n_stages: int) -> tuple[int, ...]:
    out = tuple(int(s) for s in stages)
    if not out:
        raise SimulationError("no failable stages")
    for s in out:
        if not 0 <= s < n_stages:
            raise SimulationError(f"failable stage {s} does not exist (stages 0..{n_stages - 1})")
    return out


@dataclass(frozen=True)
class FailureDraw:
    """The stages lost at one boundary and where the loss lands in the next iteration.

    ``at_fraction`` 0.0: at the boundary, before the iteration starts; in (0, 1): that fraction of
    the iteration's time after it starts, before its optimizer step, so that work is lost.
    """

    stages: tuple[int, ...]
    at_fraction: float = 0.0


class FailureSchedule(ABC):
    """Base class; subclasses implement `failures`. ``n_stages`` counts stage indices 0..S."""

    def __init__(self, n_stages: int, failable: Sequence[int] | None = None):
        if not isinstance(n_stages, int) or n_stages < 2:
            raise SimulationError(f"n_stages must be an int >= 2, got {n_stages!r}")
        self.n_stages = n_stages
        self.failable = _check_stages(range(1, n_stages) if failable is None else failable, n_stages)

    @abstractmethod
    def failures(self, step: int, now_s: float, iteration_s: float) -> tuple[int, ...]:
        """Stages that fail at the boundary before simulated step ``step`` (at ``now_s`` s)."""
        raise NotImplementedError(self)

    def draw(self, step: int, now_s: float, iteration_s: float) -> FailureDraw:
        """`failures` with where they land: at the boundary unless a subclass says otherwise."""
        return FailureDraw(tuple(self.failures(step, now_s, iteration_s)), 0.0)

    def describe(self) -> dict:
        """JSON-able description for results files."""
        return {"model": type(self).__name__, "failable": list(self.failable)}

    def pipeline_failure_probability(self, iteration_s: float) -> float | None:
        """Probability that at least one failable stage fails in an iteration of ``iteration_s``
        seconds, or None when the schedule has no rate (traces)."""
        return None


class NoFailures(FailureSchedule):
    """Never fails (the `no_failure` baseline's schedule regardless of rate)."""

    def failures(self, step: int, now_s: float, iteration_s: float) -> tuple[int, ...]:
        return ()

    def pipeline_failure_probability(self, iteration_s: float) -> float | None:
        return 0.0


def _check_probability(p: float) -> float:
    if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0 <= p < 1:
        raise SimulationError(f"failure rate {p!r} is outside [0, 1) (per-stage per-iteration probability)")
    return float(p)


class BernoulliFailures(FailureSchedule):
    """Each failable stage fails with probability ``p`` per iteration (independently)."""

    def __init__(self, p: float, seed: int, n_stages: int, failable: Sequence[int] | None = None):
        super().__init__(n_stages, failable)
        self.p = _check_probability(p)
        self.seed = seed
        self.rng = make_rng(seed, self.p)

    def _draw(self) -> np.ndarray:
        return self.rng.random(len(self.failable))  # one uniform per failable stage per step

    def failures(self, step: int, now_s: float, iteration_s: float) -> tuple[int, ...]:
        u = self._draw()
        return tuple(s for s, x in zip(self.failable, u) if x < self.p)

    def describe(self) -> dict:
        return {**super().describe(), "p_per_stage_iteration": self.p, "seed": self.seed}

    def pipeline_failure_probability(self, iteration_s: float) -> float | None:
        """1 - (1 - p)^k with k failable stages (independent draws)."""
        return 1.0 - (1.0 - self.p) ** len(self.failable)


class HourlyFailures(BernoulliFailures):
    """Each failable stage fails at ``rate_per_stage_hour``; p = 1 - exp(-rate * it_s / 3600)."""

    def __init__(self, rate_per_stage_hour: float, seed: int, n_stages: int, failable: Sequence[int] | None = None):
        if not isinstance(rate_per_stage_hour, (int, float)) or not math.isfinite(rate_per_stage_hour) \
                or rate_per_stage_hour < 0:
            raise SimulationError(f"failure rate {rate_per_stage_hour!r} per stage-hour must be finite and >= 0")
        FailureSchedule.__init__(self, n_stages, failable)
        self.rate_per_stage_hour = float(rate_per_stage_hour)
        self.p = 0.0
        self.seed = seed
        self.rng = make_rng(seed, self.rate_per_stage_hour)

    def failures(self, step: int, now_s: float, iteration_s: float) -> tuple[int, ...]:
        p = -math.expm1(-self.rate_per_stage_hour * iteration_s / 3600.0)
        u = self._draw()
        return tuple(s for s, x in zip(self.failable, u) if x < p)

    def describe(self) -> dict:
        return {"model": "HourlyFailures", "failable": list(self.failable),
                "rate_per_stage_hour": self.rate_per_stage_hour, "seed": self.seed}

    def pipeline_failure_probability(self, iteration_s: float) -> float | None:
        """1 - exp(-rate k iteration_s / 3600) with k failable stages (Poisson)."""
        return -math.expm1(-self.rate_per_stage_hour * len(self.failable) * iteration_s / 3600.0)


class _TimedFailures(FailureSchedule):
    """Failures at given simulated times; each fires at the first boundary at or after it."""

    def __init__(self, events: Sequence[tuple[float, int]], n_stages: int, failable: Sequence[int] | None):
        super().__init__(n_stages, failable)
        self.events = sorted(events, key=lambda e: e[0])  # stable: file order within a time
        self._next = 0

    def failures(self, step: int, now_s: float, iteration_s: float) -> tuple[int, ...]:
        out: set[int] = set()
        while self._next < len(self.events) and self.events[self._next][0] <= now_s:
            out.add(self.events[self._next][1])
            self._next += 1
        return tuple(sorted(out))


class TraceFailures(_TimedFailures):
    """A JSON trace: a list of ``{"time_s": float >= 0, "stage": int}`` objects.

    Raises `SimulationError` naming the file and the entry index for a malformed entry or a
    stage that does not exist.
    """

    def __init__(self, path: str | Path, n_stages: int):
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise SimulationError(f"{path}: failure trace not found") from None
        except (OSError, ValueError) as exc:
            raise SimulationError(f"{path}: not a JSON failure trace ({exc})") from None
        if not isinstance(data, list):
            raise SimulationError(f"{path}: a failure trace is a JSON list of {{time_s, stage}}, got {type(data).__name__}")
        events = []
        for i, entry in enumerate(data):
            if not isinstance(entry, dict) or set(entry) != {"time_s", "stage"}:
                raise SimulationError(f"{path}: entry {i}: expected {{\"time_s\": ..., \"stage\": ...}}, got {entry!r}")
            t, s = entry["time_s"], entry["stage"]
            if not isinstance(t, (int, float)) or isinstance(t, bool) or not math.isfinite(t) or t < 0:
                raise SimulationError(f"{path}: entry {i}: time_s must be a finite number >= 0, got {t!r}")
            if not isinstance(s, int) or isinstance(s, bool) or not 0 <= s < n_stages:
                raise SimulationError(f"{path}: entry {i}: stage {s!r} does not exist (stages 0..{n_stages - 1})")
            events.append((float(t), s))
        super().__init__(events, n_stages, sorted({s for _, s in events}) or None)
        self.path = str(path)

    def describe(self) -> dict:
        return {"model": "TraceFailures", "path": self.path, "events": len(self.events)}


@dataclass(frozen=True)
class _BambooEvent:
    time_ms: int
    event: str
    node: str


def _read_bamboo(path: str | Path) -> list[_BambooEvent]:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SimulationError(f"{path}: cannot read Bamboo trace ({exc.strerror or exc})") from None
    events = []
    for i, row in enumerate(csv.reader(text.splitlines())):
        if not row:
            continue
        if len(row) != 3 or row[1] not in ("add", "remove"):
            raise SimulationError(f"{path}: line {i + 1}: expected time_ms,add|remove,node, got {','.join(row)!r}")
        try:
            t = int(row[0])
        except ValueError:
            raise SimulationError(f"{path}: line {i + 1}: time_ms {row[0]!r} is not an integer") from None
        events.append(_BambooEvent(t, row[1], row[2].strip()))
    return events


class BambooTraceFailures(_TimedFailures):
    """Replay a Bamboo EC2 spot trace; removals fail the removed node's stage.

    Nodes map to ``failable`` stages round-robin in order of their first ``add`` (so each
    stage hosts about nodes / stages instances, like DP replicas); ``time_scale`` compresses
    trace time (0.1 = ten times faster) so short simulations see failures.
    """

    def __init__(self, path: str | Path, n_stages: int, failable: Sequence[int] | None = None,
                 time_scale: float = 1.0):
        if not time_scale > 0:
            raise SimulationError(f"time_scale must be > 0, got {time_scale!r}")
        rows = _read_bamboo(path)
        stages = _check_stages(range(1, n_stages) if failable is None else failable, n_stages)
        node_stage: dict[str, int] = {}
        events = []
        for r in rows:
            if r.node not in node_stage:
                node_stage[r.node] = stages[len(node_stage) % len(stages)]
            if r.event == "remove":
                events.append((r.time_ms / 1000.0 * time_scale, node_stage[r.node]))
        super().__init__(events, n_stages, stages)
        self.path, self.time_scale, self.node_stage = str(path), time_scale, node_stage

    def describe(self) -> dict:
        return {"model": "BambooTraceFailures", "path": self.path, "time_scale": self.time_scale,
                "removals": len(self.events), "nodes": len(self.node_stage)}


@dataclass(frozen=True)
class TraceStats:
    """Summary of a Bamboo trace (times in hours)."""

    span_h: float
    node_hours: float  # integral of the running node count over the trace
    removals: int
    removals_per_node_hour: float  # the Poisson MLE: removals / exposure
    bulk_removals: int  # removals in a minute where >= 2 nodes are removed
    max_removals_per_minute: int


def bamboo_trace_stats(path: str | Path) -> TraceStats:
    """Poisson fit of a Bamboo trace's removal rate per node-hour, and its bulk removals."""
    rows = _read_bamboo(path)
    if not rows:
        raise SimulationError(f"{path}: empty Bamboo trace")
    live, last_t, exposure_ms = 0, rows[0].time_ms, 0
    per_minute: dict[int, int] = {}
    for r in rows:
        exposure_ms += live * (r.time_ms - last_t)
        last_t = r.time_ms
        live += 1 if r.event == "add" else -1
        if r.event == "remove":
            per_minute[r.time_ms // 60_000] = per_minute.get(r.time_ms // 60_000, 0) + 1
    removals = sum(per_minute.values())
    node_hours = exposure_ms / 3.6e6
    return TraceStats(
        span_h=(rows[-1].time_ms - rows[0].time_ms) / 3.6e6,
        node_hours=node_hours,
        removals=removals,
        removals_per_node_hour=removals / node_hours if node_hours else math.inf,
        bulk_removals=sum(c for c in per_minute.values() if c >= 2),
        max_removals_per_minute=max(per_minute.values(), default=0),
    )


class MidIterationFailures(FailureSchedule):
    """``inner``'s failures, each event landing a uniform fraction into the iteration after its boundary.

    The fractions come from their own generator, seeded from (seed, rate, 1) and drawn once per step
    whether or not a stage fails, so every strategy meets the same fractions in the same order.
    """

    def __init__(self, inner: FailureSchedule, seed: int, rate: float):
        super().__init__(inner.n_stages, inner.failable)
        self.inner = inner
        bits = struct.unpack("<Q", struct.pack("<d", float(rate)))[0]
        self.rng = np.random.default_rng(np.random.SeedSequence([int(seed), bits, 1]))

    def failures(self, step: int, now_s: float, iteration_s: float) -> tuple[int, ...]:
        return self.draw(step, now_s, iteration_s).stages

    def draw(self, step: int, now_s: float, iteration_s: float) -> FailureDraw:
        stages = tuple(self.inner.failures(step, now_s, iteration_s))
        u = float(self.rng.random())
        return FailureDraw(stages, u if stages else 0.0)

    def describe(self) -> dict:
        return {**self.inner.describe(), "mid_iteration": True}


def make_failure_schedule(model: str, rate: float, seed: int, n_stages: int, *, trace: str | None = None,
                          time_scale: float = 1.0, failable: Sequence[int] | None = None,
                          mid_iteration: bool = False) -> FailureSchedule:
    """Build a schedule by model name (`FAILURE_MODELS`); ``rate`` is per iteration or per hour.

    ``mid_iteration`` wraps it in `MidIterationFailures`.
    """
    schedule = _make_schedule(model, rate, seed, n_stages, trace=trace, time_scale=time_scale, failable=failable)
    return MidIterationFailures(schedule, seed, rate) if mid_iteration else schedule


def _make_schedule(model: str, rate: float, seed: int, n_stages: int, *, trace: str | None,
                   time_scale: float, failable: Sequence[int] | None) -> FailureSchedule:
    match model:
        case "bernoulli":
            return BernoulliFailures(rate, seed, n_stages, failable)
        case "hourly":
            return HourlyFailures(rate, seed, n_stages, failable)
        case "trace":
            if trace is None:
                raise SimulationError("failure model 'trace' needs a trace file (--trace PATH)")
            return TraceFailures(trace, n_stages)
        case "bamboo":
            if trace is None:
                raise SimulationError("failure model 'bamboo' needs a trace file (--trace PATH)")
            return BambooTraceFailures(trace, n_stages, failable, time_scale)
        case _:
            raise SimulationError(f"unknown failure model {model!r}; known: {', '.join(FAILURE_MODELS)}")
