"""Learning-rate schedules: constant, or linear warm-up + cosine decay (nanoGPT `get_lr`).

Cosine (Loshchilov & Hutter 2017) decays from `lr` to `lr * MIN_LR_RATIO` between `warmup_iters`
and `total_iters` and stays at the floor after; MIN_LR_RATIO = 0.1 as in nanoGPT and Chinchilla
(Hoffmann et al. 2022). Warm-up (when `warmup_iters > 0`) applies to both schedules:
lr * (it + 1) / (warmup_iters + 1) for it < warmup_iters, as nanoGPT.
"""

from __future__ import annotations

import math

from trainer.api import TrainerConfig

__all__ = ["MIN_LR_RATIO", "learning_rate"]

MIN_LR_RATIO = 0.1


def learning_rate(config: TrainerConfig, iteration: int) -> float:
    """Base learning rate of 0-based `iteration` (before any per-stage scale such as CheckFree's 1.1)."""
    lr = config.lr
    if iteration < config.warmup_iters:
        return lr * (iteration + 1) / (config.warmup_iters + 1)
    if config.lr_schedule == "constant":
        return lr
    min_lr = lr * MIN_LR_RATIO
    span = max(1, config.total_iters - config.warmup_iters)
    progress = min(1.0, (iteration - config.warmup_iters) / span)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (lr - min_lr)
