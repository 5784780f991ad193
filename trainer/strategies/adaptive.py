"""An adaptive policy: stale neighbour copies at the Young/Daly interval of the *observed* failure rate,
or no copies at all (CheckFree with Adam moments) when copies would be too stale to be worth it.

Ours (issue 16). `neighbour_copy` needs its refresh interval chosen in advance; the right one
depends on the failure rate, which a run does not know. This policy estimates the pipeline's
failure rate as it goes (a Gamma-Poisson posterior mean: (failure events + w) / (iterations +
w * prior_mtbf_iters), i.e. `w` pseudo-events of a prior MTBF) and after every iteration picks

    k = max(1, round(sqrt(2 * copy_s * MTBF_hat) / iteration_s))      (Young 1974; Daly 2006)

with MTBF_hat = iteration_s / rate_hat. While k <= `max_staleness` it keeps `neighbour_copy`'s
copies (refreshed once k iterations have passed since the last refresh); when the estimated
failures are so rare that k exceeds it, it stops copying, and a stage lost then is rebuilt as in
`checkfree_adam` (a copy older than `max_staleness` iterations is not used either). Without
`copy_s` and `iteration_s` (seconds, from the cluster model) it refreshes every iteration.

The mode and interval of every iteration are in `describe()["history"]` (mode changes only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from trainer.errors import StrategyError
from trainer.strategies.checkfree_adam import LrBump
from trainer.strategies.checkpoint import young_daly_interval
from trainer.strategies.neighbour_copy import NeighbourCopy
from trainer.strategies.plan import Step
from trainer.strategies.planned import CopyRecord

if TYPE_CHECKING:  # pragma: no cover - typing only
    from collections.abc import Sequence

    from trainer.api import StepResult

__all__ = ["Adaptive"]


class Adaptive(NeighbourCopy):
    """Neighbour copies at the observed-rate Young/Daly interval, or CheckFree-Adam when copies do not pay."""

    name: ClassVar[str] = "adaptive"

    @dataclass(frozen=True, kw_only=True)
    class Config:
        copy_s: float | None = None  # seconds one refresh of every copy blocks the pipeline
        iteration_s: float | None = None  # seconds per iteration
        prior_mtbf_iters: float = 200.0  # prior mean iterations between pipeline failure events
        prior_weight: float = 1.0  # pseudo-events of the prior (w)
        max_staleness: int = 50  # iterations; a longer interval switches copies off
        holders: int = 2  # as neighbour_copy
        parts: str = "full"
        lr_scale: float = 1.1
        bump_decay_iters: int = 100
        norm_eps: float = 1e-4

        def __post_init__(self) -> None:
            for name in ("copy_s", "iteration_s"):
                value = getattr(self, name)
                if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                    raise StrategyError(f"adaptive {name} must be a number > 0 seconds or None, got {value!r}")
            if (self.copy_s is None) != (self.iteration_s is None):
                raise StrategyError("adaptive needs both copy_s and iteration_s, or neither")
            if not self.prior_mtbf_iters > 0 or not self.prior_weight > 0:
                raise StrategyError("adaptive prior_mtbf_iters and prior_weight must be > 0")
            if not isinstance(self.max_staleness, int) or self.max_staleness < 1:
                raise StrategyError(f"adaptive max_staleness must be an int >= 1, got {self.max_staleness!r}")
            if self.holders not in (1, 2):
                raise StrategyError(f"adaptive holders must be 1 or 2, got {self.holders!r}")
            if self.parts not in ("full", "weights"):
                raise StrategyError(f"adaptive parts must be 'full' or 'weights', got {self.parts!r}")
            if not self.lr_scale > 0:
                raise StrategyError(f"adaptive lr_scale must be > 0, got {self.lr_scale!r}")

    def on_bind(self) -> None:
        self._norms = (1.0,) * (self.view.n_stages + 1)
        self._bump = LrBump(self.config.lr_scale, self.config.bump_decay_iters)
        self._last_refresh = 0
        self._steps = 0
        self._iteration = 0
        self._events = 0
        self._history: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ the estimate and the choice
    def failure_rate(self) -> float:
        """Posterior mean of pipeline failure events per iteration (Gamma-Poisson, module docstring)."""
        cfg = self.config
        return (self._events + cfg.prior_weight) / (self._steps + cfg.prior_weight * cfg.prior_mtbf_iters)

    def chosen_interval(self) -> int | None:
        """Young/Daly interval for the estimated rate, or None when copying does not pay."""
        cfg = self.config
        if cfg.copy_s is None:
            return 1
        mtbf_s = cfg.iteration_s / self.failure_rate()
        k = young_daly_interval(cfg.copy_s, mtbf_s, cfg.iteration_s)
        return k if k <= cfg.max_staleness else None

    @property
    def refresh_interval(self) -> int:
        k = self.chosen_interval()
        return self.config.max_staleness + 1 if k is None else k

    def refresh_due(self, iteration: int) -> bool:
        k = self.chosen_interval()
        return k is not None and iteration - self._last_refresh >= k

    def note_lost(self, lost: Sequence[int]) -> None:
        super().note_lost(lost)
        self._events += 1

    def newest_copy(self, stage: int) -> CopyRecord | None:
        record = super().newest_copy(stage)
        if record is not None and self._iteration - record.iteration > self.config.max_staleness:
            return None  # too stale: a neighbour average is the better guess
        return record

    def plan_iteration_end(self, iteration: int, result: StepResult) -> tuple[Step, ...]:
        self._steps += 1
        self._iteration = iteration
        k = self.chosen_interval()
        mode = "checkfree_adam" if k is None else f"copies every {k}"
        if not self._history or self._history[-1]["mode"] != mode:
            self._history.append({"step": self._steps, "mode": mode, "failure_rate": self.failure_rate()})
        return super().plan_iteration_end(iteration, result)

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d["paper"] = "ours (issue 16): Young 1974 / Daly 2006 interval from the observed failure rate"
        if self._view is not None:
            d["history"] = list(self._history)
        return d
