"""Checkpointing: whole-model rollback to the last checkpoint.

The baseline of arXiv 2506.15461 (section 5, "checkpointing", every 50 / 100 / 40 iterations
for the small / medium / large models; docs/ANCHORS.md). Every `interval` completed iterations
the full training state (weights and Adam state of every stage, data position, counters) is
saved to storage; when any stage fails the *whole* model returns to that checkpoint and the
iterations since are re-run by the simulator (Rollback). Unlike the paper's published curve
(derived from the failure-free curve, ANCHORS "known weaknesses"), this is a real rollback: the
restored trainer replays the same batches and reproduces the same losses bit for bit.

Interval: an int, or "auto" for the Young/Daly optimum (Young 1974, "A first order
approximation to the optimum checkpoint interval"; Daly 2006):

    interval_s = sqrt(2 * C * MTBF),   interval = max(1, round(interval_s / iteration_s))

with C = `save_s` (seconds to write one checkpoint), MTBF = `mtbf_s` (mean seconds between
failures of the *whole pipeline*, i.e. per-stage MTBF / number of stages that can fail) and
`iteration_s` (seconds per iteration). The simulator computes all three from its cluster model
and failure schedule and passes them as Config fields.

When saves happen (`count`): "wall" (default) saves after every `interval` *wall* iterations,
i.e. every `interval` calls of `on_iteration_end` whatever rollbacks did in between, as the paper
does (gensyn-ai/CheckFree checkpoint_simulation.py rolls back to the progress at the last wall
iteration that is a multiple of the interval; issue 15). "progress" saves when the completed
iteration count is a multiple of the interval (so iterations redone after a rollback re-save at
the same counts; the earlier behaviour).

Our decisions: the initial model counts as checkpoint 0 at no cost (it is reproducible from the
seed); a save costs StorageWrite(all parameter + Adam bytes); a failure costs Restart(stage) per
lost stage, StorageRead(the same bytes, every stage reloads) and Rollback(to the checkpoint's
iteration count). No stage is immune.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from trainer.errors import StrategyError
from trainer.strategies.base import Action, RecoveryStrategy, Restart, Rollback, StorageRead, StorageWrite

if TYPE_CHECKING:  # pragma: no cover - typing only
    from trainer.api import StepResult
    from trainer.pipeline import PipelineTrainer, TrainerSnapshot

__all__ = ["Checkpointing", "young_daly_interval"]


def young_daly_interval(save_s: float, mtbf_s: float, iteration_s: float) -> int:
    """Optimal checkpoint interval in iterations: max(1, round(sqrt(2 * C * MTBF) / iteration_s)) (Young 1974)."""
    return max(1, round(math.sqrt(2.0 * save_s * mtbf_s) / iteration_s))


class Checkpointing(RecoveryStrategy):
    """Whole-model checkpoint every `interval` iterations; any failure rolls everything back.

    Config: `interval` (int iterations, or "auto" = Young/Daly from `save_s`, `mtbf_s`,
    `iteration_s`, all in seconds); `count` ("wall" or "progress": what the interval counts).
    """

    name: ClassVar[str] = "checkpoint"

    @dataclass(frozen=True, kw_only=True)
    class Config:
        interval: int | str = 100  # iterations between saves (paper: 100 for the 500M model) or "auto"
        save_s: float | None = None  # seconds to write one checkpoint (for "auto")
        mtbf_s: float | None = None  # mean seconds between failures of the whole pipeline (for "auto")
        iteration_s: float | None = None  # seconds per training iteration (for "auto")
        count: str = "wall"  # "wall": every `interval` wall iterations (paper); "progress": at multiples of progress

        def __post_init__(self) -> None:
            if self.count not in ("wall", "progress"):
                raise StrategyError(f"checkpoint count must be 'wall' or 'progress', got {self.count!r}")
            if self.interval == "auto":
                for name in ("save_s", "mtbf_s", "iteration_s"):
                    value = getattr(self, name)
                    if value is None or not value > 0:
                        raise StrategyError(f"checkpoint interval='auto' needs {name} > 0 seconds, got {value!r}")
            elif not isinstance(self.interval, int) or isinstance(self.interval, bool) or self.interval < 1:
                raise StrategyError(f"checkpoint interval must be an int >= 1 or 'auto', got {self.interval!r}")

    @property
    def interval_iters(self) -> int:
        """Iterations between checkpoints (Young/Daly when interval='auto')."""
        cfg = self.config
        if cfg.interval == "auto":
            return young_daly_interval(cfg.save_s, cfg.mtbf_s, cfg.iteration_s)
        return cfg.interval

    def attach(self, trainer: PipelineTrainer) -> None:
        super().attach(trainer)
        self._saved: TrainerSnapshot = trainer.snapshot()  # checkpoint 0 = the seeded initial model
        self._wall_iterations = 0  # on_iteration_end calls: iterations run, redone ones included

    @property
    def saved_iteration(self) -> int:
        """Completed iterations at the last checkpoint (where a rollback returns to)."""
        return self._saved.iteration

    def on_iteration_end(self, iteration: int, result: StepResult) -> list[Action]:
        trainer = self.trainer
        self._wall_iterations += 1
        count = self._wall_iterations if self.config.count == "wall" else trainer.iteration
        if count % self.interval_iters:
            return []
        self._saved = trainer.snapshot()
        return [StorageWrite(self._model_bytes(), of_stages=self._all_stages(), optimizer=True)]

    def recover(self, lost: tuple[int, ...], iteration: int) -> list[Action]:
        self.trainer.restore(self._saved)
        read = StorageRead(self._model_bytes(), of_stages=self._all_stages(), optimizer=True)
        return [Restart(s) for s in lost] + [read, Rollback(self._saved.iteration)]

    def storage_bytes(self) -> int:
        """One whole-model checkpoint: parameters + Adam state of every stage."""
        return self._model_bytes()

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d["paper"] = "arXiv 2506.15461 section 5 (checkpointing baseline); Young 1974 / Daly 2006 interval"
        d["interval_iters"] = self.interval_iters
        return d
