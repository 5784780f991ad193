"""Redundant computation (Bamboo, Thorpe et al., NSDI'23): lossless recovery from a neighbour's replica.

Bamboo (section 4, "redundant computation") has every node hold a replica of its successor's
stage and run that successor's forward pass as well (in pipeline bubbles), so when a node is
preempted its predecessor already holds its exact state and takes over. CheckFree
(arXiv 2506.15461, section 5) compares against it as "redundant computation": lossless, with a
measured 1.65x iteration time (docs/ANCHORS.md; the CheckFree code has no implementation).

Model here:
- Replica ring over the stages in pipeline order 0 -> 1 -> ... -> S -> 0: stage s's replica is
  held by its predecessor (s - 1, and stage S holds the embedding stage 0, whose head runs after
  S). Every stage therefore has a successor whose forward it also runs.
- Cost model (`forward_cost`): "bamboo" (default, issue 15) names that successor through
  `redundant_forward_of(stage)`; the simulator's event model runs its forward at low priority in
  the pipeline bubbles, stashes its activations in host memory and counts the replica's memory,
  and every iteration returns background Transfers (stage -> holder, the stage's parameter bytes)
  that keep the replicas exact. "double": `forward_multiplier(stage) = 2.0` (the earlier model).
- Replicas hold weights *and* Adam state (Bamboo keeps the full model state). Recovery restores
  the lost stage bit-exactly, with Restart(stage) and Transfer(holder -> stage, parameter + Adam
  bytes).
- Both a stage and its replica holder lost at the same boundary (consecutive failures, which
  Bamboo handles by a restart from a checkpoint): `on_lost_replica="reinit"` (default)
  re-initialises that stage randomly with a fresh Adam; `"raise"` raises StrategyError.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from trainer.errors import StrategyError
from trainer.strategies.base import Action, RecoveryStrategy, Restart

if TYPE_CHECKING:  # pragma: no cover - typing only
    from trainer.api import StepResult
    from trainer.pipeline import PipelineTrainer, StageState

__all__ = ["RedundantComputation"]

_ON_LOST_REPLICA = ("reinit", "raise")
_FORWARD_COSTS = ("bamboo", "double")


class RedundantComputation(RecoveryStrategy):
    """Bamboo-style redundancy: each stage's full state lives on its predecessor; lossless recovery."""

    name: ClassVar[str] = "redundant"

    @dataclass(frozen=True, kw_only=True)
    class Config:
        on_lost_replica: str = "reinit"  # stage and its holder both lost: "reinit" or "raise"
        # how the simulator prices the redundant forward: "bamboo" = the event model (the successor's
        # forward at low priority in the bubbles, its activations stashed to host memory, the replica
        # refreshed in the background); "double" = every stage's forward time x 2 (the old model)
        forward_cost: str = "bamboo"

        def __post_init__(self) -> None:
            if self.on_lost_replica not in _ON_LOST_REPLICA:
                raise StrategyError(f"redundant on_lost_replica must be one of {', '.join(_ON_LOST_REPLICA)}, "
                                    f"got {self.on_lost_replica!r}")
            if self.forward_cost not in _FORWARD_COSTS:
                raise StrategyError(f"redundant forward_cost must be one of {', '.join(_FORWARD_COSTS)}, "
                                    f"got {self.forward_cost!r}")

    def attach(self, trainer: PipelineTrainer) -> None:
        super().attach(trainer)
        self._replicas: list[StageState] = [trainer.stage_state(s) for s in range(trainer.n_stages + 1)]

    def holder(self, stage: int) -> int:
        """The stage whose node keeps `stage`'s replica: its pipeline predecessor (ring)."""
        return stage - 1 if stage >= 1 else self.trainer.n_stages

    def successor(self, stage: int) -> int:
        """The stage whose replica `stage` holds and whose forward it also runs (ring order)."""
        return stage + 1 if stage < self.trainer.n_stages else 0

    def forward_multiplier(self, stage: int) -> float:
        # "double": every stage also runs its successor's forward, priced as its own forward x 2
        return 2.0 if self.config.forward_cost == "double" else 1.0

    def redundant_forward_of(self, stage: int) -> int | None:
        return self.successor(stage) if self.config.forward_cost == "bamboo" else None

    def on_iteration_end(self, iteration: int, result: StepResult) -> list[Action]:
        trainer = self.trainer
        self._replicas = [trainer.stage_state(s) for s in range(trainer.n_stages + 1)]
        if self.config.forward_cost != "bamboo":
            return []
        # keeping the holder's replica exact needs each stage's update every iteration (its new
        # weights, one stage's parameter bytes), sent while the next iteration runs
        return [self._copy(s, self.holder(s), s, background=True) for s in range(trainer.n_stages + 1)]

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
            actions.append(self._copy(holder, stage, stage, optimizer=True))
        return actions

    def storage_bytes(self) -> int:
        """Replicas of every stage's parameters and Adam state (held in the neighbours' memory)."""
        return self._model_bytes()

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d["paper"] = "Bamboo (NSDI'23) section 4; arXiv 2506.15461 section 5 baseline"
        return d
