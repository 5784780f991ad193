"""One machine's CPU shared by all stage processes: processor sharing with background load.

The other presets give every node its own processor. When the stage processes of a run share
one host (the real multi-process run on this machine, `local-real`), k operations computing at
once each progress at

    rate(k) = min(1, cores / (k + load))      CPU seconds per second

the fair share of a time-sharing scheduler (Linux CFS: every runnable thread gets an equal slice;
Kleinrock, "Time-shared systems: a theoretical treatment", JACM 14(2), 1967, processor sharing)
among our k threads and `load` runnable threads of other programs. An operation needs its CPU
seconds of work; it finishes when that much has been delivered at the changing rate.

Measured here (simulator/calibrate.py, k = 1..5 stage processes computing at once on 2 cores
under other jobs): 0.259 / 0.223 / 0.199 / 0.180 / 0.167 CPU s per s, i.e. load 6.7-7.0 for every
k, which is what `rate(k)` with cores = 2 and load = 7 gives (0.250 / 0.222 / 0.200 / 0.182 / 0.167).
"""

from __future__ import annotations

import math

import simpy

from simulator.errors import SimulationError

__all__ = ["SharedHost", "fair_share_rate"]

_DONE_S = 1e-12  # work left below which a job is finished (floating-point residue of rate x time)


def fair_share_rate(k: int, cores: float, load: float) -> float:
    """CPU seconds per second each of `k` running jobs gets: min(1, cores / (k + load))."""
    return min(1.0, cores / (k + load)) if k > 0 else 0.0


class SharedHost:
    """Processor sharing in simpy: `yield from host.run(cpu_s)` takes as long as the share allows."""

    def __init__(self, env: simpy.Environment, cores: float, load: float = 0.0):
        if not (isinstance(cores, (int, float)) and math.isfinite(cores) and cores > 0):
            raise SimulationError(f"host cores must be a finite number > 0, got {cores!r}")
        if not (isinstance(load, (int, float)) and math.isfinite(load) and load >= 0):
            raise SimulationError(f"host load must be a finite number >= 0, got {load!r}")
        self.env, self.cores, self.load = env, float(cores), float(load)
        self._jobs: dict[simpy.Event, float] = {}  # finish event -> CPU seconds still to deliver
        self._since = 0.0
        self._version = 0

    def _rate(self) -> float:
        return fair_share_rate(len(self._jobs), self.cores, self.load)

    def _advance(self) -> None:
        delivered = (self.env.now - self._since) * self._rate()
        for ev in self._jobs:
            self._jobs[ev] -= delivered
        self._since = self.env.now

    def _reschedule(self) -> None:
        self._version += 1
        if self._jobs:
            left = max(0.0, min(self._jobs.values()))
            self.env.process(self._finish(left / self._rate(), self._version))

    def _finish(self, delay: float, version: int):
        yield self.env.timeout(delay)
        if version != self._version:
            return  # a job arrived or left meanwhile: rates changed, a newer timer is set
        self._advance()
        for ev in [e for e, left in self._jobs.items() if left <= _DONE_S]:
            del self._jobs[ev]
            ev.succeed()
        self._reschedule()

    def run(self, cpu_s: float):
        """Generator: compute `cpu_s` CPU seconds of work on the shared host."""
        if not cpu_s > 0:
            return
        self._advance()
        done = self.env.event()
        self._jobs[done] = float(cpu_s)
        self._reschedule()
        yield done
