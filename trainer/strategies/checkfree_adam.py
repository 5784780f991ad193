"""CheckFree with the neighbours' Adam moments and a decaying learning-rate bump (ours, issue 16).

CheckFree (arXiv 2506.15461 section 4.1) rebuilds a lost stage as W_i = (a W_{i+1} + b W_{i-1}) /
(a + b) but restarts its Adam from zero moments with the LR x1.1 for good. Two changes, each a
named knob:

- **Moments**: the rebuilt stage's Adam first and second moments (exp_avg, exp_avg_sq) are the same
  weighted average of the neighbours' moments, and its step count their weighted mean, so its first
  updates have the scale of its neighbours' instead of Adam's zero-moment start (whose bias
  correction makes the first steps lr-sized in every coordinate, Kingma & Ba 2015 section 3).
  Costs: the neighbours send parameters and Adam state (3x the bytes of CheckFree's transfers).
- **Decaying bump**: LR x `lr_scale` right after the rebuild, decaying linearly to x1 over
  `bump_decay_iters` iterations (CheckFree keeps x1.1 until the stage is lost again).

Stages that cannot be averaged: an outer stage (1 or S) or a middle stage with only one alive
transformer neighbour is a copy of that neighbour, moments included; a stage with none, and the
embedding stage 0, are re-initialised randomly (fresh Adam, LR x1). No stage is immune: every
failure the schedule delivers is acted on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from trainer.errors import StrategyError
from trainer.strategies.base import Restart
from trainer.strategies.checkfree import nearest_alive
from trainer.strategies.plan import Rebuild, Reinit, SetLrScale, Source, Step
from trainer.strategies.planned import PlannedStrategy

if TYPE_CHECKING:  # pragma: no cover - typing only
    from trainer.api import StepResult

__all__ = ["CheckFreeAdam", "LrBump", "average_with_moments"]


def average_with_moments(stage: int, lost: frozenset[int], n_stages: int, norms: tuple[float, ...],
                         norm_eps: float, lr_scale: float) -> Step:
    """Rebuild `stage` from its nearest alive transformer neighbours, weights and Adam moments.

    Both sides: (a X_up + b X_low) / (a + b) for X in W, exp_avg, exp_avg_sq with CheckFree's
    a = ||g_up|| + eps, b = ||g_low|| + eps (section 4.1); one side: a copy of it; none: `Reinit`.
    """
    upper = nearest_alive(stage, +1, lost, n_stages)
    lower = nearest_alive(stage, -1, lost, n_stages)
    if upper is not None and lower is not None:
        a, b = norms[upper] + norm_eps, norms[lower] + norm_eps
        return Rebuild(stage, (Source(upper, a), Source(lower, b)), a + b, "full", "moved", lr_scale)
    source = upper if upper is not None else lower
    if source is None:
        return Reinit(stage)
    return Rebuild(stage, (Source(source),), 1.0, "full", "moved", lr_scale)


class LrBump:
    """LR multipliers that decay linearly from `peak` to 1 over `decay_iters` after a rebuild.

    scale(t) = 1 + (peak - 1) * max(0, 1 - (t - t_rebuild) / decay_iters); `decay_iters = 0` keeps the
    peak until the stage is rebuilt again (CheckFree's behaviour).
    """

    def __init__(self, peak: float, decay_iters: int):
        self.peak, self.decay_iters = float(peak), int(decay_iters)
        self._since: dict[int, int] = {}  # stage -> iteration of its rebuild

    def start(self, stage: int, iteration: int) -> None:
        """`stage` was rebuilt after `iteration` completed iterations, at LR x peak."""
        self._since[stage] = iteration

    def forget(self, stage: int) -> None:
        """`stage` was restored some other way (its own LR scale came with it)."""
        self._since.pop(stage, None)

    def steps(self, iteration: int) -> tuple[Step, ...]:
        """SetLrScale steps for the decayed multipliers after `iteration` completed iterations."""
        if not self.decay_iters:
            return ()
        out = []
        for stage, t0 in sorted(self._since.items()):
            left = max(0.0, 1.0 - (iteration - t0) / self.decay_iters)
            out.append(SetLrScale(stage, 1.0 + (self.peak - 1.0) * left))
            if left == 0.0:
                del self._since[stage]
        return tuple(out)


class CheckFreeAdam(PlannedStrategy):
    """CheckFree + the neighbours' Adam moments + a decaying LR bump (module docstring)."""

    name: ClassVar[str] = "checkfree_adam"

    @dataclass(frozen=True, kw_only=True)
    class Config:
        lr_scale: float = 1.1  # LR multiplier right after a rebuild (CheckFree section 4.1)
        bump_decay_iters: int = 100  # iterations for the multiplier to decay to 1 (0: never)
        norm_eps: float = 1e-4  # as CheckFree

        def __post_init__(self) -> None:
            if not self.lr_scale > 0:
                raise StrategyError(f"checkfree_adam lr_scale must be > 0, got {self.lr_scale!r}")
            if not isinstance(self.bump_decay_iters, int) or self.bump_decay_iters < 0:
                raise StrategyError(f"checkfree_adam bump_decay_iters must be an int >= 0, "
                                    f"got {self.bump_decay_iters!r}")
            if not self.norm_eps >= 0:
                raise StrategyError(f"checkfree_adam norm_eps must be >= 0, got {self.norm_eps!r}")

    def on_bind(self) -> None:
        self._norms = (1.0,) * (self.view.n_stages + 1)
        self._bump = LrBump(self.config.lr_scale, self.config.bump_decay_iters)

    def plan_iteration_end(self, iteration: int, result: StepResult) -> tuple[Step, ...]:
        self._norms = tuple(result.grad_norms)
        return self._bump.steps(iteration)

    def plan_recovery(self, lost: tuple[int, ...], iteration: int) -> tuple[Step, ...]:
        n, cfg, lost_set = self.view.n_stages, self.config, frozenset(lost)
        steps: list[Step] = []
        for stage in lost:
            steps.append(Restart(stage))
            step = Reinit(stage) if stage == 0 else average_with_moments(stage, lost_set, n, self._norms,
                                                                          cfg.norm_eps, cfg.lr_scale)
            steps.append(step)
            if isinstance(step, Rebuild):
                self._bump.start(stage, iteration)
            else:
                self._bump.forget(stage)
        return tuple(steps)

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d["paper"] = "ours (issue 16): CheckFree arXiv 2506.15461 section 4.1 + neighbours' Adam moments"
        return d
