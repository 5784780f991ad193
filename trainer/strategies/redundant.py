"""Redundant computation (Bamboo, Thorpe et al., NSDI'23): lossless recovery from a neighbour's replica.

Bamboo (section 4, "redundant computation") has every node hold a replica of its successor's
stage and run that successor's forward pass as well (in pipeline bubbles), so when a node is
preempted its predecessor already holds its exact state and takes over. CheckFree
(arXiv 2506.15461, section 5) compares against it as "redundant computation": lossless, with a
measured 1.65x iteration time (docs/ANCHORS.md; the CheckFree code has no implementation).

Model here:
- Replica ring over the stages in pipeline order 0 -> 1 -> ... -> S -> 0: stage s's replica is
  held by its predecessor (s - 1, and stage S holds the embedding stage 0, whose head runs after
  S). Every stage therefore has a successor and `forward_multiplier` is 2.0 for all of them.
- Replicas hold weights *and* Adam state (Bamboo keeps the full model state); they are refreshed
  after every optimizer step at no extra action cost (the redundant work is priced by the forward
  multiplier). Recovery restores the lost stage bit-exactly, with Restart(stage) and
  Transfer(holder -> stage, parameter + Adam bytes).
- Both a stage and its replica holder lost at the same boundary (consecutive failures, which
  Bamboo handles by a restart from a checkpoint): `on_lost_replica="reinit"` (default)
  re-initialises that stage randomly with a fresh Adam; `"raise"` raises StrategyError.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from trainer.errors import StrategyError
from trainer.strategies.base import Action, RecoveryStrategy, Restart, Transfer

if TYPE_CHECKING:  # pragma: no cover - typing only
    from trainer.api import StepResult
    from trainer.pipeline import PipelineTrainer, StageState

__all__ = ["RedundantComputation"]

_ON_LOST_REPLICA = ("reinit", "raise")


class RedundantComputation(RecoveryStrategy):
    """Bamboo-style redundancy: each stage's full state lives on its predecessor; lossless recovery."""

    name: ClassVar[str] = "redundant"

    @dataclass(frozen=True, kw_only=True)
    class Config:
        on_lost_replica: str = "reinit"  # stage and its holder both lost: "reinit" or "raise"

        def __post_init__(self) -> None:
            if self.on_lost_replica not in _ON_LOST_REPLICA:
                raise StrategyError(f"redundant on_lost_replica must be one of {', '.join(_ON_LOST_REPLICA)}, "
                                    f"got {self.on_lost_replica!r}")

    def attach(self, trainer: PipelineTrainer) -> None:
        super().attach(trainer)
        self._replicas: list[StageState] = [trainer.stage_state(s) for s in range(trainer.n_stages + 1)]

    def holder(self, stage: int) -> int:
        """The stage whose node keeps `stage`'s replica: its pipeline predecessor (ring)."""
        return stage - 1 if stage >= 1 else self.trainer.n_stages

    def forward_multiplier(self, stage: int) -> float:
        return 2.0  # every stage also runs its successor's forward (Bamboo redundant forward)

    def on_iteration_end(self, iteration: int, result: StepResult) -> list[Action]:
        trainer = self.trainer
        self._replicas = [trainer.stage_state(s) for s in range(trainer.n_stages + 1)]
        return []

    def recover(self, lost: tuple[int, ...], iteration: int) -> list[Action]:
        trainer, lost_set = self.trainer, frozenset(lost)
        actions: list[Action] = []
        for stage in lost:
            actions.append(Restart(stage))
            holder = self.holder(stage)
            if holder in lost_set:
                if self.config.on_lost_replica == "raise":
                    raise StrategyError(f"redundant: stage {stage} and its replica holder {holder} failed together "
                                        f"at iteration {iteration}; no copy of stage {stage} survives")
                trainer.reinit_stage(stage)
                continue
            trainer.load_stage_state(stage, self._replicas[stage])
            actions.append(Transfer(holder, stage, self._stage_bytes(stage)))
        return actions

    def storage_bytes(self) -> int:
        """Replicas of every stage's parameters and Adam state (held in the neighbours' memory)."""
        return self._model_bytes()

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d["paper"] = "Bamboo (NSDI'23) section 4; arXiv 2506.15461 section 5 baseline"
        return d
