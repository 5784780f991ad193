"""The recovery-strategy interface and the cost actions it returns (docs/harness-contract.md).

A strategy repairs a `PipelineTrainer` in place when stages lose their weights and optimizer
state at an iteration boundary, and reports what the repair costs as *actions* (bytes moved,
storage reads and writes, node restarts, rollbacks). The simulator prices every action with its
cluster model; strategies never compute seconds.

Hooks, in the order the simulator calls them:

    attach(trainer)                    once, before training (sets the CheckFree+ schedule)
    forward_multiplier(stage)          cost model: 2.0 when the stage also runs a successor's forward
    swap_on_odd_microbatches()         True for CheckFree+
    redundant_forward_of(stage)        Bamboo event model: the stage whose forward `stage` also runs
    ... per iteration: trainer.train_step(); on_iteration_end(iteration, result) -> actions
    ... at a boundary with failures: on_failure(stages, iteration) -> actions
    storage_bytes(), describe()        for results files

`on_failure` drops stages the strategy treats as immune (the CheckFree paper's runs never fail
the embedding stage or, for plain CheckFree, the outer transformer stages), wipes the others
(`PipelineTrainer.lose_stage`: NaN weights, no Adam state, so a repair that reads lost state
shows up as NaN) and hands them to the subclass's `recover`.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from trainer.errors import StrategyError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from trainer.api import StepResult
    from trainer.pipeline import PipelineTrainer

__all__ = [
    "Transfer",
    "StorageWrite",
    "StorageRead",
    "Restart",
    "Rollback",
    "Action",
    "RecoveryStrategy",
]


# What an action's bytes are (optional, additive; issue 15): `of_stages` names the stages whose
# parameters the bytes hold (empty: not said) and `optimizer` adds their Adam state. A simulator
# that models a bigger model than the one trained (a cluster preset's model) prices the content
# with the modelled model's bytes; `nbytes` stays the trained model's. `background` marks a
# transfer that overlaps training (CheckFree+'s replica refresh). None of the three takes part
# in equality, so `Transfer(1, 2, n)` still equals the same transfer with its content said.


@dataclass(frozen=True)
class Transfer:
    """`nbytes` bytes of weights (and optimizer state) sent from stage `src_stage` to `dst_stage`."""

    src_stage: int
    dst_stage: int
    nbytes: int
    of_stages: tuple[int, ...] = field(default=(), compare=False)  # whose parameters (empty: not said)
    optimizer: bool = field(default=False, compare=False)  # with their Adam state
    background: bool = field(default=False, compare=False)  # overlaps training instead of stalling it


@dataclass(frozen=True)
class StorageWrite:
    """A checkpoint save of `nbytes` bytes at storage bandwidth."""

    nbytes: int
    of_stages: tuple[int, ...] = field(default=(), compare=False)
    optimizer: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class StorageRead:
    """A checkpoint load of `nbytes` bytes at storage bandwidth."""

    nbytes: int
    of_stages: tuple[int, ...] = field(default=(), compare=False)
    optimizer: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class Restart:
    """A replacement node joins for `stage` (restart delay from the cluster model)."""

    stage: int


@dataclass(frozen=True)
class Rollback:
    """Training goes back to `to_iteration` completed iterations; the simulator re-runs the rest."""

    to_iteration: int


Action = Transfer | StorageWrite | StorageRead | Restart | Rollback


class RecoveryStrategy:
    """Base of all recovery strategies; subclasses implement `recover` and the hooks they need.

    Subclasses set `name`, nest a frozen `Config` (the strategy's knobs) and override
    `recover(lost, iteration)`; optionally `on_iteration_end`, `immune_stages`,
    `forward_multiplier`, `swap_on_odd_microbatches`, `storage_bytes`.
    """

    name: ClassVar[str] = "base"

    @dataclass(frozen=True, kw_only=True)
    class Config:
        """No knobs."""

    def __init__(self, config: Config | None = None):
        config = self.Config() if config is None else config
        if not isinstance(config, self.Config):
            raise StrategyError(f"{self.name} needs a {type(self).__qualname__}.Config, got {type(config).__name__}")
        self.config = config
        self._trainer: PipelineTrainer | None = None

    # ------------------------------------------------------------------ hooks of the contract
    @property
    def trainer(self) -> PipelineTrainer:
        if self._trainer is None:
            raise StrategyError(f"strategy {self.name} is not attached to a trainer; call attach(trainer) first")
        return self._trainer

    def attach(self, trainer: PipelineTrainer) -> None:
        """Bind to the trainer before training; sets its micro-batch schedule."""
        self._trainer = trainer
        trainer.swap_odd_micro_batches = self.swap_on_odd_microbatches()

    def forward_multiplier(self, stage: int) -> float:
        """Factor on the stage's forward time (2.0 when it also runs its successor's forward)."""
        return 1.0

    def swap_on_odd_microbatches(self) -> bool:
        """True when odd micro-batches run the CheckFree+ swapped stage order."""
        return False

    def redundant_forward_of(self, stage: int) -> int | None:
        """The stage whose forward `stage` also runs in its pipeline bubbles (Bamboo), or None.

        Optional hook (issue 15): the simulator's Bamboo event model schedules that extra
        forward at low priority on `stage`'s node and stashes its activations.
        """
        return None

    def immune_stages(self) -> frozenset[int]:
        """Stages whose failures this strategy ignores (as the paper's runs do)."""
        return frozenset()

    def on_failure(self, stages: Sequence[int], iteration: int) -> list[Action]:
        """Stages `stages` lost weights and optimizer state after `iteration` completed iterations.

        Repairs the trainer in place and returns the repair's actions. Failures of immune stages
        are ignored; several stages failing at one boundary are handed to `recover` together.
        """
        lost = self._validate(stages)
        lost = tuple(s for s in lost if s not in self.immune_stages())
        if not lost:
            return []
        for stage in lost:
            self.trainer.lose_stage(stage)
        return self.recover(lost, iteration)

    def recover(self, lost: tuple[int, ...], iteration: int) -> list[Action]:
        """Rebuild the (already wiped) stages `lost` (sorted, unique, non-immune)."""
        raise NotImplementedError

    def on_iteration_end(self, iteration: int, result: StepResult) -> list[Action]:
        """Called after each train_step with its result; returns actions (e.g. checkpoint saves)."""
        return []

    def storage_bytes(self) -> int:
        """Extra bytes the strategy keeps (checkpoints, replicas)."""
        return 0

    def describe(self) -> dict[str, Any]:
        """Name, knobs and immune stages, for results files."""
        attached = self._trainer is not None
        return {
            "name": self.name,
            "config": dataclasses.asdict(self.config),
            "immune_stages": sorted(self.immune_stages()) if attached else None,
            "swap_on_odd_microbatches": self.swap_on_odd_microbatches(),
            "storage_bytes": self.storage_bytes() if attached else None,
        }

    # ------------------------------------------------------------------ helpers
    def _validate(self, stages: Sequence[int]) -> tuple[int, ...]:
        n = self.trainer.n_stages
        good, bad = set(), []
        for s in stages:
            if isinstance(s, numbers.Integral) and not isinstance(s, bool) and 0 <= int(s) <= n:
                good.add(int(s))  # numpy integers from a failure schedule are fine
            else:
                bad.append(s)
        if bad:
            raise StrategyError(f"{self.name}: failed stages {bad} out of range 0..{n}")
        return tuple(sorted(good))

    def _stage_bytes(self, stage: int) -> int:
        """Parameter + Adam bytes of one stage (what a full stage copy moves)."""
        t = self.trainer
        return t.stage_param_bytes(stage) + t.stage_optimizer_bytes(stage)

    def _model_bytes(self) -> int:
        """Parameter + Adam bytes of the whole model (what a whole-model checkpoint holds)."""
        return sum(self._stage_bytes(s) for s in range(self.trainer.n_stages + 1))

    def _all_stages(self) -> tuple[int, ...]:
        return tuple(range(self.trainer.n_stages + 1))

    def _copy(self, src: int, dst: int, of_stage: int, *, optimizer: bool = False,
              background: bool = False) -> Transfer:
        """Transfer of `of_stage`'s parameters (and Adam state) from `src` to `dst`, content said."""
        t = self.trainer
        nbytes = self._stage_bytes(of_stage) if optimizer else t.stage_param_bytes(of_stage)
        return Transfer(src, dst, nbytes, of_stages=(of_stage,), optimizer=optimizer, background=background)
