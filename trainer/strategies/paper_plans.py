"""The paper's strategies as planners, for runs where the bytes really move (trainer.distributed).

Each class here decides exactly as the class of the same name in this package (same Config, same
stages rebuilt from the same sources with the same coefficients, same re-initialisation order,
same actions) but says so as a plan (`trainer.strategies.plan`), so the real multi-process run can
carry the decision out with real transfers. tests/trainer/test_paper_plans.py runs both on the same
failures and checks bit-identical weights, Adam states, losses and actions.

| planner | decides as | copies it keeps |
|---|---|---|
| `CheckFreePlan` | `CheckFree` (arXiv 2506.15461 section 4.1) | none |
| `CheckFreePlusPlan` | `CheckFreePlus` (section 4.2) | stage 0's weights on stages 1 and S |
| `CheckpointPlan` | `Checkpointing` (section 5 baseline; Young 1974) | whole model on storage |
| `RedundantPlan` | `RedundantComputation` (Bamboo, NSDI'23) | each stage's full state on its predecessor |
| `NoFailurePlan` | `NoFailure` | none |

One difference is deliberate: the planners know which node holds which copy (`CopyRegistry`), so a
copy held by a node that was replaced since the last refresh is not read. `CheckFreePlus` keeps its
replica in the strategy object instead; when stage 1 was replaced after the last refresh and stage
0 is lost, it reads the copy as if stage 1 still held it, the planner reads stage S's identical copy
(same weights, another source in the Transfer action).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from trainer.errors import StrategyError
from trainer.strategies.base import Restart, Rollback
from trainer.strategies.checkfree import CheckFree, nearest_alive
from trainer.strategies.checkfree_plus import CheckFreePlus
from trainer.strategies.checkpoint import Checkpointing, young_daly_interval
from trainer.strategies.no_failure import NoFailure
from trainer.strategies.plan import LoadCheckpoint, Rebuild, Reinit, SaveCheckpoint, Source, Step
from trainer.strategies.planned import PlannedStrategy
from trainer.strategies.redundant import RedundantComputation

if TYPE_CHECKING:  # pragma: no cover - typing only
    from trainer.api import StepResult

__all__ = ["CheckFreePlan", "CheckFreePlusPlan", "CheckpointPlan", "RedundantPlan", "NoFailurePlan",
           "PAPER_PLANS", "average_of_neighbours", "swapped_order"]


def average_of_neighbours(stage: int, lost: frozenset[int], n_stages: int, norms: tuple[float, ...],
                          norm_eps: float, lr_scale: float) -> Step:
    """CheckFree's rebuild of `stage` (`trainer.strategies.checkfree.recover_by_average`) as a step.

    Both sides alive: W = (a W_up + b W_low) / (a + b), a = ||g_up|| + eps, b = ||g_low|| + eps;
    one side: a copy of it; none: random re-initialisation. Fresh Adam, LR x `lr_scale`.
    """
    upper = nearest_alive(stage, +1, lost, n_stages)
    lower = nearest_alive(stage, -1, lost, n_stages)
    if upper is not None and lower is not None:
        a, b = norms[upper] + norm_eps, norms[lower] + norm_eps
        return Rebuild(stage, (Source(upper, a), Source(lower, b)), a + b, "weights", "fresh", lr_scale)
    source = upper if upper is not None else lower
    if source is None:
        return Reinit(stage)
    return Rebuild(stage, (Source(source),), 1.0, "weights", "fresh", lr_scale)


def swapped_order(n_stages: int) -> tuple[int, ...]:
    """Transformer stages in forward order on odd micro-batches under CheckFree+ (section 4.2).

    The same order as `PipelineTrainer.stage_order(1)` with the swap on: 1<->2, then S-1<->S.
    """
    order = list(range(1, n_stages + 1))
    order[0], order[1] = order[1], order[0]
    if n_stages > 2:
        order[-2], order[-1] = order[-1], order[-2]
    return tuple(order)


class CheckFreePlan(PlannedStrategy):
    """`CheckFree` as a planner: neighbour average, fresh Adam, LR x1.1; outer stages immune by default."""

    name: ClassVar[str] = "checkfree"
    Config = CheckFree.Config

    def on_bind(self) -> None:
        self._norms = (1.0,) * (self.view.n_stages + 1)  # CheckFree code: prev_gradient_norm = 1

    def immune_stages(self) -> frozenset[int]:
        n = self.view.n_stages
        immune = {0} if self.config.immune_embedding_stage else set()
        if self.config.immune_outer_stages:
            immune |= {1, n}
        return frozenset(immune)

    def plan_iteration_end(self, iteration: int, result: StepResult) -> tuple[Step, ...]:
        self._norms = tuple(result.grad_norms)
        return ()

    def plan_recovery(self, lost: tuple[int, ...], iteration: int) -> tuple[Step, ...]:
        n, cfg, lost_set = self.view.n_stages, self.config, frozenset(lost)
        steps: list[Step] = []
        for stage in lost:
            steps.append(Restart(stage))
            if stage == 0 or stage in (1, n):
                steps.append(Reinit(stage))
            else:
                steps.append(average_of_neighbours(stage, lost_set, n, self._norms, cfg.norm_eps, cfg.lr_scale))
        return tuple(steps)


class CheckFreePlusPlan(PlannedStrategy):
    """`CheckFreePlus` as a planner: swap schedule, partner copies, stage 0 replicated on 1 and S."""

    name: ClassVar[str] = "checkfree_plus"
    Config = CheckFreePlus.Config

    def on_bind(self) -> None:
        self._norms = (1.0,) * (self.view.n_stages + 1)

    def swap_on_odd_microbatches(self) -> bool:
        return True

    def immune_stages(self) -> frozenset[int]:
        return frozenset({0}) if self.config.immune_embedding_stage else frozenset()

    def partner(self, stage: int) -> int:
        """The stage that runs in `stage`'s position on odd micro-batches (its stand-in)."""
        return swapped_order(self.view.n_stages)[stage - 1]

    def replica_holders(self) -> tuple[int, int]:
        return (1, self.view.n_stages)

    def _refresh(self, iteration: int) -> tuple[Step, ...]:
        background = self.config.replica_sync == "background"  # overlapped with the next iteration
        return tuple(self.copies.hold(0, h, "weights", iteration, background=background)
                     for h in self.replica_holders())

    def plan_attach(self) -> tuple[Step, ...]:
        return self._refresh(0)  # the initial model: reproducible from the seed, not priced

    def plan_iteration_end(self, iteration: int, result: StepResult) -> tuple[Step, ...]:
        self._norms = tuple(result.grad_norms)
        if iteration % self.config.replica_sync_every:
            return ()
        return self._refresh(iteration)

    def plan_recovery(self, lost: tuple[int, ...], iteration: int) -> tuple[Step, ...]:
        n, cfg, lost_set = self.view.n_stages, self.config, frozenset(lost)
        steps: list[Step] = []
        for stage in lost:
            steps.append(Restart(stage))
            if stage == 0:
                holders = [r.holder for r in self.copies.copies_of(0) if r.holder not in lost_set]
                if holders:
                    steps.append(Rebuild(0, (Source(holders[0], 1.0, copy_of=0),), 1.0, "weights", "fresh", 1.0))
                else:
                    steps.append(Reinit(0))
                continue
            if not (stage in (1, n) or (cfg.copy_swap_partners and stage in (2, n - 1))):
                steps.append(average_of_neighbours(stage, lost_set, n, self._norms, cfg.norm_eps, cfg.lr_scale))
                continue
            source = self.partner(stage)
            if source in lost_set:
                inward = +1 if stage <= n // 2 else -1
                source = nearest_alive(stage, inward, lost_set, n) or nearest_alive(stage, -inward, lost_set, n)
            if source is None:
                steps.append(Reinit(stage))
            else:
                steps.append(Rebuild(stage, (Source(source),), 1.0, "weights", "fresh", cfg.lr_scale))
        return tuple(steps)


class CheckpointPlan(PlannedStrategy):
    """`Checkpointing` as a planner: whole-model saves every `interval`, rollback on any failure."""

    name: ClassVar[str] = "checkpoint"
    Config = Checkpointing.Config

    @property
    def interval_iters(self) -> int:
        cfg = self.config
        if cfg.interval == "auto":
            return young_daly_interval(cfg.save_s, cfg.mtbf_s, cfg.iteration_s)
        return cfg.interval

    def on_bind(self) -> None:
        self._saved_iteration = 0
        self._wall_iterations = 0  # iterations run, redone ones included (count="wall", the paper)

    def plan_attach(self) -> tuple[Step, ...]:
        return (SaveCheckpoint(),)  # checkpoint 0 = the seeded initial model (not priced)

    def plan_iteration_end(self, iteration: int, result: StepResult) -> tuple[Step, ...]:
        self._wall_iterations += 1
        count = self._wall_iterations if self.config.count == "wall" else iteration
        if count % self.interval_iters:
            return ()
        self._saved_iteration = iteration
        return (SaveCheckpoint(),)

    def plan_recovery(self, lost: tuple[int, ...], iteration: int) -> tuple[Step, ...]:
        return (*(Restart(s) for s in lost), LoadCheckpoint(), Rollback(self._saved_iteration))

    def storage_bytes(self) -> int:
        v = self.view
        return sum(v.stage_param_bytes(s) + v.stage_optimizer_bytes(s) for s in range(v.n_stages + 1))


class RedundantPlan(PlannedStrategy):
    """`RedundantComputation` as a planner: each stage's full state on its predecessor, exact restore."""

    name: ClassVar[str] = "redundant"
    Config = RedundantComputation.Config

    def holder(self, stage: int) -> int:
        return stage - 1 if stage >= 1 else self.view.n_stages

    def successor(self, stage: int) -> int:
        return stage + 1 if stage < self.view.n_stages else 0

    def forward_multiplier(self, stage: int) -> float:
        return 2.0 if self.config.forward_cost == "double" else 1.0

    def redundant_forward_of(self, stage: int) -> int | None:
        return self.successor(stage) if self.config.forward_cost == "bamboo" else None

    def _refresh(self, iteration: int) -> tuple[Step, ...]:
        # as RedundantComputation (docs/trainer.md): "bamboo" prices the new weights sent in the
        # background each iteration; "double" prices the refresh by the forward multiplier
        bamboo = self.config.forward_cost == "bamboo"
        return tuple(self.copies.hold(s, self.holder(s), "full", iteration, priced=bamboo, background=True,
                                      priced_parts="weights")
                     for s in range(self.view.n_stages + 1))

    def plan_attach(self) -> tuple[Step, ...]:
        return self._refresh(0)  # not priced (the initial model is reproducible from the seed)

    def plan_iteration_end(self, iteration: int, result: StepResult) -> tuple[Step, ...]:
        return self._refresh(iteration)

    def plan_recovery(self, lost: tuple[int, ...], iteration: int) -> tuple[Step, ...]:
        lost_set = frozenset(lost)
        steps: list[Step] = []
        for stage in lost:
            steps.append(Restart(stage))
            holder = self.holder(stage)
            if holder in lost_set or not any(r.holder == holder for r in self.copies.copies_of(stage, "full")):
                if self.config.on_lost_replica == "raise":
                    raise StrategyError(f"redundant: stage {stage} and its replica holder {holder} failed together "
                                        f"at iteration {iteration}; no copy of stage {stage} survives")
                steps.append(Reinit(stage))
                continue
            steps.append(Rebuild(stage, (Source(holder, 1.0, copy_of=stage),), 1.0, "full", "moved", None))
        return tuple(steps)


class NoFailurePlan(PlannedStrategy):
    """`NoFailure` as a planner: any failure is an error."""

    name: ClassVar[str] = "no_failure"
    Config = NoFailure.Config

    def plan_recovery(self, lost: tuple[int, ...], iteration: int) -> tuple[Step, ...]:
        raise StrategyError(f"no_failure is the failure-free reference; got failure of stages {list(lost)} "
                            f"at iteration {iteration}")


PAPER_PLANS: dict[str, type[PlannedStrategy]] = {
    cls.name: cls for cls in (NoFailurePlan, CheckFreePlan, CheckFreePlusPlan, CheckpointPlan, RedundantPlan)
}
