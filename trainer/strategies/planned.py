"""PlannedStrategy: a recovery strategy that decides by plans, so one decision runs anywhere.

A planned strategy never touches tensors. Its three planners return plans
(`trainer.strategies.plan`):

    plan_attach()                         once, before training: unpriced set-up (initial copies)
    plan_iteration_end(iteration, result) after each optimizer step: copies, checkpoints, LR changes
    plan_recovery(lost, iteration)        lost stages (wiped, non-immune): one Restart per stage first

and reads only `self.view` (a `PipelineView`: sizes and LR multipliers) and `self.copies` (the
`CopyRegistry` of which node holds a copy of which stage since which iteration). In-process
(`attach(trainer)`, the simulator's harness) the hooks of the contract run the plans with an
`InProcessExecutor` and return `plan_actions` as their cost; the real multi-process run
(`trainer.distributed`) calls `bind(view)` and the planners, and runs the same plans on the stage
processes. The paper's strategies are also available as planners (`trainer.strategies.paper_plans`)
for the real run; tests check that they act exactly like the classes in this package.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from trainer.errors import StrategyError
from trainer.strategies.base import Action, RecoveryStrategy
from trainer.strategies.plan import Hold, InProcessExecutor, PipelineView, Step, part_bytes, plan_actions

if TYPE_CHECKING:  # pragma: no cover - typing only
    from trainer.api import StepResult
    from trainer.pipeline import PipelineTrainer

__all__ = ["CopyRecord", "CopyRegistry", "PlannedStrategy", "ring_neighbours"]


def ring_neighbours(stage: int, n_stages: int) -> tuple[int, int]:
    """(predecessor, successor) of `stage` in the pipeline ring 0 -> 1 -> ... -> S -> 0.

    Stage 0 (embedding and head) follows S because the head runs after S (CheckFree's layout).
    """
    n = n_stages + 1
    return (stage - 1) % n, (stage + 1) % n


@dataclass(frozen=True)
class CopyRecord:
    """A copy of `stage` held by `holder`, taken after `iteration` completed iterations."""

    holder: int
    stage: int
    parts: str
    iteration: int


class CopyRegistry:
    """Which node holds which copy: the planner's mirror of what the executors hold.

    A planner records every `Hold` it emits (`hold`) and every lost node (`drop_holder`), so it
    only ever plans to read copies that exist.
    """

    def __init__(self) -> None:
        self._records: dict[tuple[int, int], CopyRecord] = {}

    def hold(self, src: int, holder: int, parts: str, iteration: int, priced: bool = True, *,
             background: bool = False, priced_parts: str | None = None) -> Hold:
        """Record that `holder` now keeps `src`'s state; return the plan step that does it."""
        step = Hold(src, holder, parts, priced, background, priced_parts)
        self._records[(holder, src)] = CopyRecord(holder, src, parts, iteration)
        return step

    def drop_holder(self, stage: int) -> None:
        """The node of `stage` was lost: every copy it held is gone."""
        for key in [k for k in self._records if k[0] == stage]:
            del self._records[key]

    def copies_of(self, stage: int, parts: str = "weights") -> list[CopyRecord]:
        """Copies of `stage` that carry at least `parts`, by holder (off-node copies first)."""
        out = [r for r in self._records.values()
               if r.stage == stage and (parts == "weights" or r.parts == "full")]
        return sorted(out, key=lambda r: (r.holder == stage, r.holder))

    def records(self) -> list[CopyRecord]:
        """Every copy currently held."""
        return sorted(self._records.values(), key=lambda r: (r.holder, r.stage))


class PlannedStrategy(RecoveryStrategy):
    """Base of strategies written as planners (see the module docstring for the hooks)."""

    name: ClassVar[str] = "planned"

    def __init__(self, config=None):
        super().__init__(config)
        self._view: PipelineView | None = None
        self._executor: InProcessExecutor | None = None
        self.copies = CopyRegistry()

    # ------------------------------------------------------------------ binding
    @property
    def view(self) -> PipelineView:
        if self._view is None:
            raise StrategyError(f"strategy {self.name} is not bound to a pipeline; call attach or bind first")
        return self._view

    def bind(self, view: PipelineView) -> None:
        """Bind to a pipeline view without a trainer (the real run): planners only."""
        self._view = view
        self.copies = CopyRegistry()
        self.on_bind()

    def on_bind(self) -> None:
        """Subclass hook: initialise planner state from `self.view` (norms, timers...)."""

    def attach(self, trainer: PipelineTrainer) -> None:
        super().attach(trainer)
        self._executor = InProcessExecutor(trainer)
        self.bind(trainer)
        self._executor.run(self.plan_attach())

    # ------------------------------------------------------------------ planners
    def plan_attach(self) -> tuple[Step, ...]:
        """Set-up before training (not priced: the initial model is reproducible from the seed)."""
        return ()

    def plan_iteration_end(self, iteration: int, result: StepResult) -> tuple[Step, ...]:
        """Steps after an optimizer step (`iteration` completed iterations)."""
        return ()

    def plan_recovery(self, lost: tuple[int, ...], iteration: int) -> tuple[Step, ...]:
        """Steps that rebuild the wiped, non-immune stages `lost` (sorted)."""
        raise NotImplementedError(self)

    def note_lost(self, lost: Sequence[int]) -> None:
        """The nodes of `lost` are gone, with the copies they held."""
        for stage in lost:
            self.copies.drop_holder(stage)

    # ------------------------------------------------------------------ the contract's hooks, in-process
    def on_failure(self, stages: Sequence[int], iteration: int) -> list[Action]:
        lost = tuple(s for s in self._validate(stages) if s not in self.immune_stages())
        if not lost:
            return []
        for stage in lost:
            self._executor.lose(stage)
        return self.recover(lost, iteration)

    def recover(self, lost: tuple[int, ...], iteration: int) -> list[Action]:
        self.note_lost(lost)
        steps = self.plan_recovery(lost, iteration)
        self._executor.run(steps)
        return plan_actions(steps, self.view)

    def on_iteration_end(self, iteration: int, result: StepResult) -> list[Action]:
        steps = self.plan_iteration_end(iteration, result)
        self._executor.run(steps)
        return plan_actions(steps, self.view)

    def storage_bytes(self) -> int:
        """Bytes of every copy held by the nodes (off-node copies and local in-memory ones)."""
        return sum(part_bytes(self.view, r.stage, r.parts) for r in self.copies.records())

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        if self._view is not None:  # bound without a trainer (the real run)
            d["immune_stages"] = sorted(self.immune_stages())
            d["storage_bytes"] = self.storage_bytes()
        d["planned"] = True
        return d
