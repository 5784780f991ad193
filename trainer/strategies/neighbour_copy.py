"""Neighbour-held stale copies: every stage's state lives on its ring neighbours, refreshed every k iterations.

Ours (issue 16). Bamboo (NSDI'23) keeps a stage's replica on its predecessor and pays a redundant
forward every iteration to keep it current; CheckFree (arXiv 2506.15461) keeps nothing and
approximates a lost stage by its neighbours' average. In between: each stage *sends* its full
state (weights, Adam moments, LR multiplier) to its `holders` ring neighbours every `refresh_every`
iterations and computes nothing twice. A lost stage comes back as its newest surviving copy,
at most `refresh_every - 1` iterations stale, with its own Adam state; with `refresh_every = 1` the
recovery is exact, like Bamboo's, for the price of the copies instead of a second forward.

- Holders: the ring 0 -> 1 -> ... -> S -> 0 (`ring_neighbours`): `holders=2` puts the copies on
  the predecessor and the successor, so two adjacent stages lost together are both restored (each
  has a surviving holder on its far side); `holders=1` uses the predecessor only.
- Refresh interval: an int, or "auto" = Young/Daly (Young 1974; Daly 2006) with `copy_s` (seconds
  one refresh of all copies blocks the pipeline), `mtbf_s` (mean seconds between failures of the
  whole pipeline) and `iteration_s`: max(1, round(sqrt(2 copy_s mtbf_s) / iteration_s)). The
  formula assumes a failure loses the work since the last copy of the *whole model*; a stale copy
  loses that work on one stage only, so it errs towards copying more often.
- No surviving copy (three adjacent stages lost, or a holder replaced since the last refresh and
  the stage lost with its other holder): after the copies are restored, the stage is rebuilt as in
  `checkfree_adam` (neighbours' weights and Adam moments, averaged over the nearest alive or
  just-restored stages, LR x `lr_scale` decaying over `bump_decay_iters`); the embedding stage 0
  without a copy is re-initialised randomly.
- A replacement node takes its copies at once (one `Hold` per stage it holds for), so the ring is
  whole again before the next failure.

Costs (actions): a refresh is one `Transfer(stage -> holder, parameter + Adam bytes)` per stage and
holder, priced one after another; a restore is `Restart(stage)` and one `Transfer(holder -> stage)`.
Storage: `holders` full copies of the model in the neighbours' memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from trainer.errors import StrategyError
from trainer.strategies.base import Restart
from trainer.strategies.checkfree_adam import LrBump, average_with_moments
from trainer.strategies.checkpoint import young_daly_interval
from trainer.strategies.plan import Rebuild, Reinit, Source, Step
from trainer.strategies.planned import CopyRecord, PlannedStrategy, ring_neighbours

if TYPE_CHECKING:  # pragma: no cover - typing only
    from trainer.api import StepResult

__all__ = ["NeighbourCopy"]


class NeighbourCopy(PlannedStrategy):
    """Stale copies of every stage on its ring neighbours; exact when refreshed every iteration."""

    name: ClassVar[str] = "neighbour_copy"

    @dataclass(frozen=True, kw_only=True)
    class Config:
        refresh_every: int | str = 1  # iterations between refreshes, or "auto" (Young/Daly)
        holders: int = 2  # 1: the ring predecessor; 2: predecessor and successor
        parts: str = "full"  # "full": weights + Adam + LR scale; "weights": weights only (fresh Adam)
        lr_scale: float = 1.1  # LR multiplier of a stage rebuilt without a copy
        bump_decay_iters: int = 100  # that multiplier decays to 1 over these iterations
        norm_eps: float = 1e-4  # CheckFree's epsilon for the fallback average
        copy_s: float | None = None  # seconds one refresh blocks the pipeline (for "auto")
        mtbf_s: float | None = None  # mean seconds between failures of the whole pipeline (for "auto")
        iteration_s: float | None = None  # seconds per iteration (for "auto")

        def __post_init__(self) -> None:
            if self.refresh_every == "auto":
                for name in ("copy_s", "mtbf_s", "iteration_s"):
                    value = getattr(self, name)
                    if value is None or not value > 0:
                        raise StrategyError(f"neighbour_copy refresh_every='auto' needs {name} > 0 seconds, "
                                            f"got {value!r}")
            elif not isinstance(self.refresh_every, int) or isinstance(self.refresh_every, bool) \
                    or self.refresh_every < 1:
                raise StrategyError(f"neighbour_copy refresh_every must be an int >= 1 or 'auto', got {self.refresh_every!r}")
            if self.holders not in (1, 2):
                raise StrategyError(f"neighbour_copy holders must be 1 or 2, got {self.holders!r}")
            if self.parts not in ("full", "weights"):
                raise StrategyError(f"neighbour_copy parts must be 'full' or 'weights', got {self.parts!r}")
            if not self.lr_scale > 0:
                raise StrategyError(f"neighbour_copy lr_scale must be > 0, got {self.lr_scale!r}")

    def on_bind(self) -> None:
        self._norms = (1.0,) * (self.view.n_stages + 1)
        self._bump = LrBump(self.config.lr_scale, self.config.bump_decay_iters)
        self._last_refresh = 0

    # ------------------------------------------------------------------ placement and timing
    def holders_of(self, stage: int) -> tuple[int, ...]:
        """The nodes that keep `stage`'s copies: its ring predecessor (and successor)."""
        pred, succ = ring_neighbours(stage, self.view.n_stages)
        return (pred, succ)[: self.config.holders]

    @property
    def refresh_interval(self) -> int:
        """Iterations between refreshes (Young/Daly when refresh_every='auto')."""
        cfg = self.config
        if cfg.refresh_every == "auto":
            return young_daly_interval(cfg.copy_s, cfg.mtbf_s, cfg.iteration_s)
        return cfg.refresh_every

    def refresh_due(self, iteration: int) -> bool:
        """True when the copies are refreshed after `iteration` completed iterations."""
        return iteration - self._last_refresh >= self.refresh_interval

    def _refresh(self, iteration: int) -> tuple[Step, ...]:
        self._last_refresh = iteration
        parts = self.config.parts
        return tuple(self.copies.hold(s, h, parts, iteration)
                     for s in range(self.view.n_stages + 1) for h in self.holders_of(s))

    # ------------------------------------------------------------------ planners
    def plan_attach(self) -> tuple[Step, ...]:
        return self._refresh(0)

    def plan_iteration_end(self, iteration: int, result: StepResult) -> tuple[Step, ...]:
        self._norms = tuple(result.grad_norms)
        steps = self._bump.steps(iteration)
        if self.refresh_due(iteration):
            steps += self._refresh(iteration)
        return steps

    def newest_copy(self, stage: int) -> CopyRecord | None:
        """The newest surviving off-node copy of `stage` (ties: the lower holder), or None."""
        records = [r for r in self.copies.copies_of(stage, self.config.parts) if r.holder != stage]
        return max(records, key=lambda r: (r.iteration, -r.holder), default=None)

    def plan_recovery(self, lost: tuple[int, ...], iteration: int) -> tuple[Step, ...]:
        cfg, n = self.config, self.view.n_stages
        steps: list[Step] = [Restart(s) for s in lost]
        without_copy = []
        for stage in lost:
            record = self.newest_copy(stage)
            if record is None:
                without_copy.append(stage)
                continue
            exact = cfg.parts == "full"
            steps.append(Rebuild(stage, (Source(record.holder, 1.0, copy_of=stage),), 1.0, cfg.parts,
                                 "moved" if exact else "fresh", None if exact else 1.0))
            self._bump.forget(stage)
        still_lost = frozenset(without_copy)
        for stage in without_copy:
            step = Reinit(stage) if stage == 0 else average_with_moments(stage, still_lost, n, self._norms,
                                                                          cfg.norm_eps, cfg.lr_scale)
            steps.append(step)
            if isinstance(step, Rebuild):
                self._bump.start(stage, iteration)
            else:
                self._bump.forget(stage)
        for stage in lost:  # the replacement takes the copies it holds for its neighbours
            steps += [self.copies.hold(src, stage, cfg.parts, iteration)
                      for src in range(n + 1) if stage in self.holders_of(src)]
        return tuple(steps)

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d["paper"] = "ours (issue 16); Bamboo NSDI'23 placement without the redundant forward"
        if self._view is not None:
            d["refresh_interval"] = self.refresh_interval
        return d
