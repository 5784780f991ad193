"""Gemini-style in-memory checkpoints held by neighbours, whole-model rollback (ours, issue 16).

Gemini (Wang et al., SOSP'23, sections 3-4) checkpoints training state to CPU memory, on the node
itself and on peers, so that recovery reads memory instead of remote storage; it recovers 13x
faster than checkpointing to storage. Here, every `interval` iterations each stage keeps a local
copy of its full state (weights, Adam, LR scale) and sends one to each of its `holders` ring
neighbours (predecessor, and successor with `holders=2`); the driver remembers the iteration and
the data position. On any failure the whole model returns to that in-memory checkpoint: alive
stages from their local copy (no transfer), lost stages from a surviving holder (one Transfer),
and the iterations since are re-run (`Rollback`). Unlike `checkpoint`, nothing touches storage and
the interval can be short; unlike `neighbour_copy`, the model stays consistent (every stage from
the same iteration) at the price of the re-run iterations.

- Interval: an int, or "auto" = Young/Daly (Young 1974, Daly 2006) from `copy_s` (seconds one
  in-memory checkpoint blocks the pipeline), `mtbf_s` (whole pipeline) and `iteration_s`.
- No surviving copy of a lost stage (it and all its holders lost together): that stage is
  re-initialised randomly and the others still roll back (Gemini would fall back to its storage
  checkpoint; our runs keep none, and the event is counted in the log as a `Reinit`).
- A replacement node takes its local copy and the copies it holds for its neighbours right after
  the rollback, when every stage's state equals the checkpoint.

Costs: per checkpoint one `Transfer(stage -> holder, parameter + Adam bytes)` per stage and holder;
per failure `Restart`, one `Transfer` per lost stage, the re-hold transfers and `Rollback`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from trainer.errors import StrategyError
from trainer.strategies.base import Restart, Rollback
from trainer.strategies.checkpoint import young_daly_interval
from trainer.strategies.plan import MarkDataPosition, Rebuild, Reinit, RestoreDataPosition, Source, Step
from trainer.strategies.planned import PlannedStrategy, ring_neighbours

if TYPE_CHECKING:  # pragma: no cover - typing only
    from trainer.api import StepResult

__all__ = ["Gemini"]

_TAG = "gemini"


class Gemini(PlannedStrategy):
    """In-memory checkpoints on the node and its ring neighbours; any failure rolls everything back."""

    name: ClassVar[str] = "gemini"

    @dataclass(frozen=True, kw_only=True)
    class Config:
        interval: int | str = 10  # iterations between in-memory checkpoints, or "auto" (Young/Daly)
        holders: int = 2  # remote copies: 1 = the ring predecessor, 2 = predecessor and successor
        copy_s: float | None = None  # seconds one in-memory checkpoint blocks the pipeline (for "auto")
        mtbf_s: float | None = None  # mean seconds between failures of the whole pipeline (for "auto")
        iteration_s: float | None = None  # seconds per iteration (for "auto")

        def __post_init__(self) -> None:
            if self.interval == "auto":
                for name in ("copy_s", "mtbf_s", "iteration_s"):
                    value = getattr(self, name)
                    if value is None or not value > 0:
                        raise StrategyError(f"gemini interval='auto' needs {name} > 0 seconds, got {value!r}")
            elif not isinstance(self.interval, int) or isinstance(self.interval, bool) or self.interval < 1:
                raise StrategyError(f"gemini interval must be an int >= 1 or 'auto', got {self.interval!r}")
            if self.holders not in (1, 2):
                raise StrategyError(f"gemini holders must be 1 or 2, got {self.holders!r}")

    def on_bind(self) -> None:
        self._saved_iteration = 0

    @property
    def interval_iters(self) -> int:
        """Iterations between in-memory checkpoints (Young/Daly when interval='auto')."""
        cfg = self.config
        if cfg.interval == "auto":
            return young_daly_interval(cfg.copy_s, cfg.mtbf_s, cfg.iteration_s)
        return cfg.interval

    def holders_of(self, stage: int) -> tuple[int, ...]:
        """The nodes that keep `stage`'s remote copies."""
        return ring_neighbours(stage, self.view.n_stages)[: self.config.holders]

    def _checkpoint(self, iteration: int) -> tuple[Step, ...]:
        self._saved_iteration = iteration
        n = self.view.n_stages
        steps: list[Step] = [self.copies.hold(s, s, "full", iteration) for s in range(n + 1)]
        steps += [self.copies.hold(s, h, "full", iteration) for s in range(n + 1) for h in self.holders_of(s)]
        return (*steps, MarkDataPosition(_TAG))

    def plan_attach(self) -> tuple[Step, ...]:
        return self._checkpoint(0)

    def plan_iteration_end(self, iteration: int, result: StepResult) -> tuple[Step, ...]:
        if iteration % self.interval_iters:
            return ()
        return self._checkpoint(iteration)

    def plan_recovery(self, lost: tuple[int, ...], iteration: int) -> tuple[Step, ...]:
        n, saved = self.view.n_stages, self._saved_iteration
        steps: list[Step] = [Restart(s) for s in lost]
        for stage in range(n + 1):
            records = self.copies.copies_of(stage, "full")
            local = [r for r in records if r.holder == stage]
            record = local[0] if local else (records[0] if records else None)
            if record is None:
                steps.append(Reinit(stage))
            else:
                steps.append(Rebuild(stage, (Source(record.holder, 1.0, copy_of=stage),), 1.0, "full", "moved", None))
        steps += [RestoreDataPosition(_TAG), Rollback(saved)]
        for stage in lost:  # the replacement's local copy and the copies it holds, all equal to the checkpoint
            steps.append(self.copies.hold(stage, stage, "full", saved))
            steps += [self.copies.hold(src, stage, "full", saved) for src in range(n + 1) if stage in self.holders_of(src)]
        return tuple(steps)

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d["paper"] = "Gemini (SOSP'23) in-memory checkpoints on ring neighbours; ours (issue 16)"
        if self._view is not None:
            d["interval_iters"] = self.interval_iters
        return d
