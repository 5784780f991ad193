"""CheckFree: rebuild a lost stage as the gradient-norm weighted average of its neighbours.

Blagoev, Ersoy, Chen, "All is Not Lost: LLM Recovery without Checkpoints", arXiv 2506.15461,
section 4.1 (CheckFree), and the published code (gensyn-ai/CheckFree,
simulate_training/convergence_training.py, mode "ours-grad-avg"):

    W_i = (a * W_{i+1} + b * W_{i-1}) / (a + b)
    a = ||g_{i+1}|| + 1e-4,  b = ||g_{i-1}|| + 1e-4

with ||g_j|| the L2 norm of stage j's gradient in the previous iteration *after* per-stage
clipping to 1.0 (docs/ANCHORS.md, Harness; the code's `alpha`, `beta`, `prev_gradient_norm`).
Each neighbour is weighted by its own norm. Before the first iteration the code's norms are 1.0
(`prev_gradient_norm = [1, ...]`), so the first average is 50/50; we do the same. The recovered
stage gets a fresh Adam (zero moments, step 0) and a learning rate of `lr_scale` (1.1) times the
schedule, kept until the stage is recovered again (the code builds the new optimizer with
`lr_scale * init_lr`; repeated recoveries do not compound).

Where the paper is silent (our decisions, docs/trainer.md):
- Outer transformer stages 1 and S have one neighbour, so averaging cannot rebuild them. The
  paper's runs make them immune (`immune_outer_stages=True`, the default: their failures are
  ignored and `describe()` lists them). With `immune_outer_stages=False` a lost outer stage is
  re-initialised randomly (the model's init) with a fresh Adam at the base learning rate.
- The embedding stage 0 never fails in the paper's code (`if s == 0: continue`);
  `immune_embedding_stage=True` by default, and when False it is re-initialised randomly.
- Several stages lost at one boundary: each lost middle stage averages the nearest stage on each
  side that was *not* lost at this boundary (W_{i+1} -> first alive stage above i, W_{i-1} ->
  first alive below, each with its own norm). If only one side has an alive transformer stage
  the lost stage is a copy of it (fresh Adam, LR x lr_scale); if none, random re-initialisation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from trainer.errors import StrategyError
from trainer.strategies.base import Action, RecoveryStrategy, Restart, Transfer

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch

    from trainer.api import StepResult
    from trainer.pipeline import PipelineTrainer

__all__ = ["CheckFree", "weighted_average", "nearest_alive", "recover_by_average"]


def weighted_average(w_next: Mapping[str, torch.Tensor], w_prev: Mapping[str, torch.Tensor],
                     a: float, b: float) -> dict[str, torch.Tensor]:
    """(a * W_{i+1} + b * W_{i-1}) / (a + b) per parameter (CheckFree section 4.1, eq. for W_i)."""
    return {k: (a * w_next[k] + b * w_prev[k]) / (a + b) for k in w_next}


def nearest_alive(stage: int, step: int, lost: frozenset[int], n_stages: int) -> int | None:
    """First transformer stage from `stage + step` outward (step +1 or -1) not in `lost`, or None."""
    j = stage + step
    while 1 <= j <= n_stages:
        if j not in lost:
            return j
        j += step
    return None


def recover_by_average(trainer: PipelineTrainer, stage: int, lost: frozenset[int],
                       norms: tuple[float, ...], norm_eps: float, lr_scale: float) -> list[Action]:
    """Rebuild middle-or-any transformer `stage` from its nearest alive neighbours (see module doc).

    Returns the Transfers of the neighbours' weights; the caller adds Restart.
    """
    upper = nearest_alive(stage, +1, lost, trainer.n_stages)
    lower = nearest_alive(stage, -1, lost, trainer.n_stages)
    nbytes = trainer.stage_param_bytes(stage)
    if upper is not None and lower is not None:
        a, b = norms[upper] + norm_eps, norms[lower] + norm_eps
        trainer.set_stage_weights(stage, weighted_average(trainer.stage_weights(upper), trainer.stage_weights(lower), a, b))
        trainer.reset_optimizer(stage, lr_scale)
        return [Transfer(upper, stage, nbytes, of_stages=(upper,)), Transfer(lower, stage, nbytes, of_stages=(lower,))]
    source = upper if upper is not None else lower
    if source is None:
        trainer.reinit_stage(stage)
        return []
    trainer.set_stage_weights(stage, trainer.stage_weights(source))
    trainer.reset_optimizer(stage, lr_scale)
    return [Transfer(source, stage, nbytes, of_stages=(source,))]


class CheckFree(RecoveryStrategy):
    """CheckFree (arXiv 2506.15461 section 4.1): lost stage = norm-weighted average of its neighbours.

    Fresh Adam and LR x1.1 for the rebuilt stage; outer stages immune by default (paper runs),
    else re-initialised randomly; embedding stage immune by default, else re-initialised randomly.
    Costs: Restart(stage) and one Transfer of the stage's parameter bytes from each neighbour used.
    """

    name: ClassVar[str] = "checkfree"

    @dataclass(frozen=True, kw_only=True)
    class Config:
        lr_scale: float = 1.1  # LR multiplier of a rebuilt stage (section 4.1; code `lr_scale`)
        norm_eps: float = 1e-4  # added to each neighbour's gradient norm (code: + 0.0001)
        immune_outer_stages: bool = True  # paper runs: stages 1 and S never fail
        immune_embedding_stage: bool = True  # paper code: stage 0 never fails

        def __post_init__(self) -> None:
            if not self.lr_scale > 0:
                raise StrategyError(f"checkfree lr_scale must be > 0, got {self.lr_scale!r}")
            if not self.norm_eps >= 0:
                raise StrategyError(f"checkfree norm_eps must be >= 0, got {self.norm_eps!r}")

    def attach(self, trainer: PipelineTrainer) -> None:
        super().attach(trainer)
        self._norms = (1.0,) * (trainer.n_stages + 1)  # code: prev_gradient_norm initialised to 1

    def immune_stages(self) -> frozenset[int]:
        immune = {0} if self.config.immune_embedding_stage else set()
        if self.config.immune_outer_stages:
            immune |= {1, self.trainer.n_stages}
        return frozenset(immune)

    def on_iteration_end(self, iteration: int, result: StepResult) -> list[Action]:
        self._norms = tuple(result.grad_norms)  # post-clipping norms, read at the next failure
        return []

    @property
    def grad_norms(self) -> tuple[float, ...]:
        """Per-stage gradient norms (after clipping) of the last iteration, as used for weighting."""
        return self._norms

    def recover(self, lost: tuple[int, ...], iteration: int) -> list[Action]:
        trainer, cfg = self.trainer, self.config
        lost_set = frozenset(lost)
        actions: list[Action] = []
        for stage in lost:
            actions.append(Restart(stage))
            if stage == 0 or stage in (1, trainer.n_stages):
                trainer.reinit_stage(stage)  # not immune and not rebuildable by averaging
                continue
            actions += recover_by_average(trainer, stage, lost_set, self._norms, cfg.norm_eps, cfg.lr_scale)
        return actions

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d["paper"] = "arXiv 2506.15461 section 4.1"
        d["outer_stages"] = ("immune (failures ignored, as in the paper's runs: stages 1 and S "
                             "have one neighbour each, so averaging cannot rebuild them; "
                             "checkfree_plus can)"
                             if self.config.immune_outer_stages
                             else "re-initialised randomly when lost")
        d["embedding_stage"] = ("immune (failures ignored, as in the paper's code)"
                                if self.config.immune_embedding_stage else "re-initialised randomly when lost")
        return d
