"""CheckFree+: out-of-order pipelining so the outer stages can be recovered by copying.

arXiv 2506.15461 section 4.2 (CheckFree+) and the published code (convergence_training.py):
on odd micro-batches stages 1<->2 and S-1<->S swap positions in the forward (code:
`if i == 1 and mbid % 2 == 1: x = stages[2](x)` ...), so stage 2 learns to act as stage 1 and
S-1 as S. A lost outer stage is then a copy of its swap partner (fresh Adam, LR x1.1, code
`lr_scale * init_lr`); middle stages are rebuilt as in CheckFree (section 4.1); the
(de)embedding is replicated on the neighbouring stages at O(|E|) storage.

Our decisions where the paper is silent (docs/trainer.md):
- Any S >= 2. The partner of stage s is the stage that occupies s's position on odd
  micro-batches (`PipelineTrainer.stage_order`): S = 2 -> 1<->2; S = 3 composes the overlapping
  swaps into the odd order (2, 3, 1), so partner(1) = 2 and partner(3) = 1; S >= 4 -> partner(1)
  = 2 and partner(S) = S-1 as in the paper.
- The published code also rebuilds stages 2 and S-1 by copying their partner instead of
  averaging; `copy_swap_partners=True` reproduces that, the default follows the paper's text
  (only the outer stages are copied).
- Replicas of the embedding stage: a full copy (embedding, final norm, head) on stage 1 and on
  stage S, refreshed every `replica_sync_every` iterations after the optimizer step; each refresh
  returns Transfer(0 -> 1, |E|) and Transfer(0 -> S, |E|), marked `background` by default
  (`replica_sync="background"`): the simulator overlaps them with the next iteration, as the paper
  prices CF+ iterations like CF's (91.32 s); `replica_sync="blocking"` makes them stall training. A lost stage 0 gets the weights of the last
  refresh from an alive holder and a fresh Adam at the base LR (the replica holds no Adam state).
  If both holders are lost at the same boundary, stage 0 is re-initialised randomly.
- Partner lost at the same boundary: the outer stage copies the nearest alive transformer stage
  inward; none alive -> random re-initialisation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from trainer.errors import StrategyError
from trainer.strategies.base import Action, RecoveryStrategy, Restart, Transfer
from trainer.strategies.checkfree import nearest_alive, recover_by_average

if TYPE_CHECKING:  # pragma: no cover - typing only
    from trainer.api import StepResult
    from trainer.pipeline import PipelineTrainer

__all__ = ["CheckFreePlus"]


class CheckFreePlus(RecoveryStrategy):
    """CheckFree+ (arXiv 2506.15461 section 4.2): swap schedule, copy recovery, replicated embedding.

    Costs: Restart(stage) plus Transfer of the source stage's parameter bytes (partner copy, or
    both neighbours for averaging, or the replica holder for stage 0); per replica refresh two
    Transfers of the embedding stage's parameter bytes.
    """

    name: ClassVar[str] = "checkfree_plus"

    @dataclass(frozen=True, kw_only=True)
    class Config:
        lr_scale: float = 1.1  # LR multiplier of a rebuilt transformer stage (code `lr_scale`)
        norm_eps: float = 1e-4  # as CheckFree
        copy_swap_partners: bool = False  # True: also copy stages 2 and S-1 from partners (published code)
        immune_embedding_stage: bool = False  # paper code never fails stage 0; here it is recoverable
        replica_sync_every: int = 1  # iterations between embedding-replica refreshes
        # "background": the refresh overlaps the next iteration, as the paper prices it (CF+ iterations
        # cost the same as CF's, 91.32 s, docs/ANCHORS.md); "blocking": it stalls training (issue 15)
        replica_sync: str = "background"

        def __post_init__(self) -> None:
            if not self.lr_scale > 0:
                raise StrategyError(f"checkfree_plus lr_scale must be > 0, got {self.lr_scale!r}")
            if not self.norm_eps >= 0:
                raise StrategyError(f"checkfree_plus norm_eps must be >= 0, got {self.norm_eps!r}")
            if not isinstance(self.replica_sync_every, int) or self.replica_sync_every < 1:
                raise StrategyError(f"checkfree_plus replica_sync_every must be an int >= 1, "
                                    f"got {self.replica_sync_every!r}")
            if self.replica_sync not in ("background", "blocking"):
                raise StrategyError(f"checkfree_plus replica_sync must be 'background' or 'blocking', "
                                    f"got {self.replica_sync!r}")

    def attach(self, trainer: PipelineTrainer) -> None:
        super().attach(trainer)
        self._norms = (1.0,) * (trainer.n_stages + 1)
        self._replica = trainer.stage_weights(0)  # initial model: reproducible from the seed, no transfer

    def swap_on_odd_microbatches(self) -> bool:
        return True

    def immune_stages(self) -> frozenset[int]:
        return frozenset({0}) if self.config.immune_embedding_stage else frozenset()

    def partner(self, stage: int) -> int:
        """The stage that runs in `stage`'s position on odd micro-batches (its stand-in)."""
        trainer = self.trainer
        odd = trainer.stage_order(1) if trainer.swap_odd_micro_batches else tuple(range(1, trainer.n_stages + 1))
        return odd[stage - 1]

    def replica_holders(self) -> tuple[int, int]:
        """Stages holding a copy of the embedding stage: its pipeline neighbours 1 and S."""
        return (1, self.trainer.n_stages)

    def on_iteration_end(self, iteration: int, result: StepResult) -> list[Action]:
        self._norms = tuple(result.grad_norms)
        trainer = self.trainer
        if trainer.iteration % self.config.replica_sync_every:
            return []
        self._replica = trainer.stage_weights(0)
        background = self.config.replica_sync == "background"
        return [self._copy(0, holder, 0, background=background) for holder in self.replica_holders()]

    def storage_bytes(self) -> int:
        """Two full copies of the embedding stage's parameters (O(|E|), section 4.2)."""
        return len(self.replica_holders()) * self.trainer.stage_param_bytes(0)

    def recover(self, lost: tuple[int, ...], iteration: int) -> list[Action]:
        trainer, cfg = self.trainer, self.config
        n = trainer.n_stages
        lost_set = frozenset(lost)
        actions: list[Action] = []
        for stage in lost:
            actions.append(Restart(stage))
            if stage == 0:
                holders = [h for h in self.replica_holders() if h not in lost_set]
                if holders:
                    trainer.set_stage_weights(0, self._replica)
                    trainer.reset_optimizer(0, 1.0)
                    actions.append(self._copy(holders[0], 0, 0))
                else:
                    trainer.reinit_stage(0)
                continue
            copy_from_partner = stage in (1, n) or (cfg.copy_swap_partners and stage in (2, n - 1))
            if not copy_from_partner:
                actions += recover_by_average(trainer, stage, lost_set, self._norms, cfg.norm_eps, cfg.lr_scale)
                continue
            source = self.partner(stage)
            if source in lost_set:
                inward = +1 if stage <= n // 2 else -1
                source = nearest_alive(stage, inward, lost_set, n) or nearest_alive(stage, -inward, lost_set, n)
            if source is None:
                trainer.reinit_stage(stage)
                continue
            trainer.set_stage_weights(stage, trainer.stage_weights(source))
            trainer.reset_optimizer(stage, cfg.lr_scale)
            actions.append(Transfer(source, stage, trainer.stage_param_bytes(stage), of_stages=(source,)))
        return actions

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d["paper"] = "arXiv 2506.15461 section 4.2"
        if self._trainer is not None:
            n = self.trainer.n_stages
            d["swap_partners"] = [[1, self.partner(1)], [n, self.partner(n)]]  # [outer stage, copied from]
            d["embedding_replicas_on"] = list(self.replica_holders())
        return d
