"""Sweep presets: ``quick`` (minutes, a smoke-sized comparison) and ``paper`` (overnight).

A preset is a frozen dataclass returned by a function of a registry (docs/STYLE.md rule 10);
command-line flags override its fields.

``quick`` (<= 10 min on 2 cores for all five strategies x 2 rates x 2 seeds = 18 runs, since
``no_failure`` runs once per seed): the trainer's default tiny Llama (4 stages x 1 layer,
d_model 64, 4 micro-batches of 8 x 64 tokens) on Shakespeare for 300 iterations, which takes
validation loss from ~6.9 to ~4.1 nats/token. Its rates (0.01 and 0.03 per stage per
iteration) are 1x and 3x the paper's highest (0.01, "33 %") so that 4 failable stages see
~12 and ~36 failures in 300 iterations; checkpoints every 25 iterations keep the paper's
ratio of checkpoint interval to mean time between failures at its 5 % setting
(100 / 185 iterations) at the lower rate. Target 4.6 nats/token is reached by the
failure-free run after about half the iterations.

``paper``: CheckFree's grid, rates 0.0009 / 0.002 / 0.004 / 0.01 per stage per iteration
("5 / 10 / 16 / 33 %", docs/ANCHORS.md), checkpoints every 100 iterations (the paper's
500M setting), 6 transformer stages as the paper so ``--cluster paper-geo`` applies, at a
model size (6 x 1 layers, d_model 96, ~0.2 s per step on one core) and length (3,000 iterations,
3 seeds, 45 runs, at most 2x steps for rollback storms: ~240k steps, ~6 h on 2 cores) that fits
a night. Its target (4.0 nats/token) is our estimate for this model, not the paper's 2.85 on
OpenWebText; adjust with ``--target-loss``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from simulator.errors import SimulationError

__all__ = ["SweepPreset", "SWEEP_PRESETS", "sweep_preset", "ALL_STRATEGIES"]

ALL_STRATEGIES = ("no_failure", "checkfree", "checkfree_plus", "checkpoint", "redundant")


@dataclass(frozen=True, kw_only=True)
class SweepPreset:
    """Defaults of one sweep; every field can be overridden on the command line."""

    trainer_config: dict[str, Any]
    strategies: tuple[str, ...] = ALL_STRATEGIES
    failure_rates: tuple[float, ...]
    seeds: tuple[int, ...]
    iterations: int
    eval_every: int
    eval_batches: int = 4
    target_loss: float
    cluster: str = "local"
    # GPipe: CheckFree's code starts every micro-batch and aggregates after the last backward.
    # (Our 1F1B with CheckFree+ swaps over-counts bubbles: docs/simulator.md, limitations.)
    schedule: str = "gpipe"
    strategy_knobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    max_steps_factor: float = 4.0  # a run stops after this x iterations steps (rollback storms)


def quick() -> SweepPreset:
    return SweepPreset(
        trainer_config={"n_stages": 4, "layers_per_stage": 1, "d_model": 64, "total_iters": 200},
        failure_rates=(0.01, 0.03),
        seeds=(0, 1),
        iterations=200,
        eval_every=20,
        eval_batches=4,
        target_loss=4.4,
        strategy_knobs={"checkpoint": {"interval": 10}},
        max_steps_factor=3.0,
    )


def paper() -> SweepPreset:
    return SweepPreset(
        trainer_config={"n_stages": 6, "layers_per_stage": 1, "d_model": 96, "n_heads": 4, "n_kv_heads": 2,
                        "ffn_hidden": 256, "total_iters": 3000},
        failure_rates=(0.0009, 0.002, 0.004, 0.01),
        seeds=(0, 1, 2),
        iterations=3000,
        eval_every=100,
        eval_batches=8,
        target_loss=4.0,
        strategy_knobs={"checkpoint": {"interval": 100}},
        max_steps_factor=2.0,
    )


SWEEP_PRESETS = {"quick": quick, "paper": paper}


def sweep_preset(name: str) -> SweepPreset:
    """The preset registered as ``name``."""
    if name not in SWEEP_PRESETS:
        raise SimulationError(f"unknown preset {name!r}; known: {', '.join(SWEEP_PRESETS)}")
    return SWEEP_PRESETS[name]()
