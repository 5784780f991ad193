"""Sweep presets: ``quick``, ``paper``, ``regime`` (+ ``regime-ci``) and ``paper-full``.

A preset is a frozen dataclass returned by a function of a registry (docs/STYLE.md rule 10);
command-line flags override its fields.

``quick`` (18 runs: about 3 min on 2 idle cores, 7-15 min on shared ones, README.md): the trainer's
default tiny Llama (4 stages x 1 layer, d_model 64) on Shakespeare, rates 0.01 and 0.03 per stage
per iteration, checkpoints every 10.

``paper``: CheckFree's grid (0.0009 / 0.002 / 0.004 / 0.01, "5 / 10 / 16 / 33 %",
docs/ANCHORS.md) on a 6 x 1-layer d 96 model for 3,000 iterations: the paper's *rates* on a model
that is not in the paper's regime (docs/fidelity.md explains why this does not reproduce it).

``regime``: the paper's regime on this machine (docs/fidelity.md section 2): the dimensionless
quantities that decide the comparison matched to the paper's, the costs in seconds priced on
``paper-geo`` with the 500M model's bytes. ``regime-ci`` is a small real instance of it for CI.

``paper-full``: the paper's 500M LLaMa (6 x 4 layers, d 1024) for ~25k iterations at the paper's
rates, sized for a GPU or a Ray cluster; ``--dry-run`` prints its cost estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from simulator.errors import SimulationError

__all__ = ["SweepPreset", "SWEEP_PRESETS", "sweep_preset", "ALL_STRATEGIES", "dry_run_report",
           "REGIME_RATES", "PAPER_RATES"]

ALL_STRATEGIES = ("no_failure", "checkfree", "checkfree_plus", "checkpoint", "redundant")
PAPER_RATES = (0.0009, 0.002, 0.004)  # "5 / 10 / 16 %" per stage-hour (docs/ANCHORS.md)
# docs/fidelity.md section 2: the regime compresses the paper's run c-fold. Our failure-free run
# reaches its target after N0 ~ 260-300 iterations, the paper's after 10,000; c = 100 / 3 keeps the
# paper's stage failures per stage before the target (p N0) within ~15 %, its failures per
# checkpoint interval exactly (interval 100 / c = 3) and its recovery, restart and checkpoint time
# relative to the run (action seconds / c); the damage per recovery relative to the run (D / N0)
# is a property of the trained model, measured to be the paper's (docs/fidelity.md).
REGIME_COMPRESSION = 100.0 / 3.0
REGIME_RATES = tuple(round(p * REGIME_COMPRESSION, 6) for p in PAPER_RATES)


@dataclass(frozen=True, kw_only=True)
class SweepPreset:
    """Defaults of one sweep; every field can be overridden on the command line."""

    summary: str  # one line for --help
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
    redundant_overhead: float | None = None  # impose a measured redundant slowdown (None: event model)
    stop_at_target: bool = False  # runs end at their first evaluation at or below the target
    jump_eval_batches: int = 0  # > 0: loss just before and after every acted-on failure
    action_time_scale: float = 1.0  # x every action's seconds (a time-compressed regime: 1 / c)
    # dry-run figures: this machine's measured step time for the trained model (s) and, for
    # paper-full, the accelerator the estimate assumes
    step_s_here: float | None = None


def quick() -> SweepPreset:
    return SweepPreset(
        summary="tiny 4x1 d64 model, 200 iterations, rates 0.01/0.03, 2 seeds, local cluster "
                "(a sweep of 18 runs: ~3 min on 2 idle cores, 7-15 min shared; one run: "
                "~10-60 s)",
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
        summary="the paper's rates 0.0009..0.01 on a 6x1 d96 model, 3000 iterations, 3 seeds (a night)",
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


# The regime's trained model and run (docs/fidelity.md section 2).
REGIME_MODEL = {"n_stages": 6, "layers_per_stage": 1, "d_model": 64, "n_heads": 4, "n_kv_heads": 2,
                "ffn_hidden": 172, "context": 64, "micro_batch_size": 8, "n_micro_batches": 4, "lr": 3e-3}
REGIME_TARGET = 4.35  # nats/token: the failure-free run reaches it after ~N0 iterations (docs/fidelity.md)
REGIME_N0 = 260  # failure-free iterations to the target (measured, seed 0, docs/fidelity.md)
REGIME_CHECKPOINT_INTERVAL = round(100 / REGIME_COMPRESSION)  # the paper's 100 wall iterations, compressed: 3


def regime() -> SweepPreset:
    return SweepPreset(
        summary=f"the paper's regime here: 6x1 d64 model priced as the 500M on paper-geo, run compressed "
                f"{REGIME_COMPRESSION:.1f}x (rates {'/'.join(f'{r:g}' for r in REGIME_RATES)}), 5 seeds, "
                f"until loss {REGIME_TARGET} (~1.5 h idle)",
        trainer_config=dict(REGIME_MODEL, total_iters=4 * REGIME_N0),
        failure_rates=REGIME_RATES,
        seeds=(0, 1, 2, 3, 4),
        iterations=4 * REGIME_N0,
        eval_every=10,
        eval_batches=8,
        target_loss=REGIME_TARGET,
        cluster="paper-geo",
        strategy_knobs={"checkpoint": {"interval": REGIME_CHECKPOINT_INTERVAL},
                        "checkfree": {"lr_scale": 1.2}, "checkfree_plus": {"lr_scale": 1.2}},
        max_steps_factor=1.0,
        redundant_overhead=151.04 / 91.35,
        stop_at_target=True,
        jump_eval_batches=2,
        action_time_scale=1.0 / REGIME_COMPRESSION,
        step_s_here=0.11,
    )


def regime_ci() -> SweepPreset:
    base = regime()
    return SweepPreset(
        summary="a small real instance of regime for CI: 24 iterations, its highest rate, one seed",
        trainer_config=dict(base.trainer_config, total_iters=24),
        failure_rates=(REGIME_RATES[-1],),
        seeds=(0,),
        iterations=24,
        eval_every=4,
        eval_batches=2,
        target_loss=base.target_loss,
        cluster=base.cluster,
        strategy_knobs=base.strategy_knobs,
        max_steps_factor=1.0,
        redundant_overhead=base.redundant_overhead,
        stop_at_target=False,
        jump_eval_batches=1,
        action_time_scale=base.action_time_scale,
        step_s_here=base.step_s_here,
    )


# CheckFree's 500M convergence setup (gensyn-ai/CheckFree simulate_training/500M_config.json):
# d 1024, 16 heads, 6 stages x 4 layers, sequence 1024, batch 16 x 4 micro-batches, Adam lr 3e-4
# constant (LLaMa: lr_lambda = 1), lr_scale 1.2, validation every 500 iterations, OpenWebText.
PAPER_500M_MODEL = {"n_stages": 6, "layers_per_stage": 4, "d_model": 1024, "n_heads": 16, "n_kv_heads": 16,
                    "ffn_hidden": 4096, "context": 1024, "micro_batch_size": 16, "n_micro_batches": 4,
                    "lr": 3e-4, "vocab_size": 32000}


def paper_full() -> SweepPreset:
    return SweepPreset(
        summary="the paper's 500M LLaMa at the paper's rates, ~25k iterations, 5 seeds: ~450 A100-hours, "
                "a Ray cluster (--dry-run prints the cost)",
        trainer_config=dict(PAPER_500M_MODEL, total_iters=25_000),
        failure_rates=PAPER_RATES,
        seeds=(0, 1, 2, 3, 4),
        iterations=25_000,
        eval_every=500,
        eval_batches=50,
        target_loss=2.85,
        cluster="paper-geo",
        strategy_knobs={"checkpoint": {"interval": 100},
                        "checkfree": {"lr_scale": 1.2}, "checkfree_plus": {"lr_scale": 1.2}},
        max_steps_factor=1.0,
        redundant_overhead=151.04 / 91.35,
        stop_at_target=True,
    )


SWEEP_PRESETS = {"quick": quick, "paper": paper, "regime": regime, "regime-ci": regime_ci, "paper-full": paper_full}


def sweep_preset(name: str) -> SweepPreset:
    """The preset registered as ``name``."""
    if name not in SWEEP_PRESETS:
        raise SimulationError(f"unknown preset {name!r}; known: {', '.join(SWEEP_PRESETS)}")
    return SWEEP_PRESETS[name]()


# -- dry run ------------------------------------------------------------------------------------

# Assumptions of the accelerator estimate (ours, stated in the report): an A100 80GB at 312 TFLOP/s
# bf16 dense (NVIDIA A100 datasheet) and 40 % model FLOPs utilisation (MFU; PaLM appendix B reports
# 46 % at 540B, small models on one GPU reach less).
A100_PEAK_FLOPS = 312e12
ASSUMED_MFU = 0.40
# Expected steps per run as a multiple of the failure-free iterations to target, from the paper's
# iterations to target (docs/ANCHORS.md): failure-free ~10k; checkpointing up to 24.8k.
PAPER_STEPS = {"no_failure": 10_000, "checkfree": 17_500, "checkfree_plus": 15_500, "checkpoint": 23_800,
               "redundant": 10_000}


def _train_flops_per_iteration(cfg: dict[str, Any]) -> float:
    """Forward + backward FLOPs of one iteration: 3 x forward (backward = 2 x forward, Kaplan et al. 2020)."""
    from trainer.api import TrainerConfig
    from trainer.model import stage_forward_flops

    config = TrainerConfig(**{k: v for k, v in cfg.items() if k != "data"})
    return 3.0 * sum(stage_forward_flops(config)) * config.n_micro_batches


def _measured_flops_per_s_here() -> tuple[float, float]:
    """(FLOP/s, s per step) of one real step of the trainer's default tiny model on this machine (1 thread)."""
    import tempfile
    import time
    from pathlib import Path

    import numpy as np
    import torch

    from trainer import PipelineTrainer
    from trainer.api import TrainerConfig

    torch.set_num_threads(1)  # process_time counts every thread; one thread, as sweep workers run
    with tempfile.TemporaryDirectory() as tmp:  # any text does for timing: no corpus download
        words = np.random.default_rng(0).choice(["the", "king", "sea", "wind", "gold", "night", "war", "song"], 30_000)
        text = Path(tmp) / "timing.txt"
        text.write_text(" ".join(words))
        trainer = PipelineTrainer(TrainerConfig(n_stages=6, data=str(text)), cache_dir=Path(tmp) / "cache")
    trainer.train_step()  # warm-up
    t0 = time.process_time()
    steps = 5
    for _ in range(steps):
        trainer.train_step()
    step_s = (time.process_time() - t0) / steps
    return _train_flops_per_iteration({"n_stages": 6}) / step_s, step_s


def _param_count(cfg: dict[str, Any]) -> int:
    from trainer.api import TrainerConfig

    c = TrainerConfig(**{k: v for k, v in cfg.items() if k != "data"})
    kv = c.n_kv_heads * (c.d_model // c.n_heads)
    layer = 2 * c.d_model * c.d_model + 2 * c.d_model * kv + 3 * c.d_model * c.ffn_hidden + 2 * c.d_model
    return c.n_stages * c.layers_per_stage * layer + 2 * c.vocab_size * c.d_model + c.d_model


def dry_run_report(name: str, strategies: list[str], rates: list[float], seeds: list[int],
                   iterations: int | None = None, measure: bool = True) -> str:
    """The size and cost estimate of preset ``name``'s sweep, without running it (``sweep --dry-run``).

    Steps per run: for the 500M model the paper's iterations to target per strategy, else the
    preset's upper bound. FLOPs: 3 x the forward FLOPs of `trainer.model.stage_forward_flops`.
    ``measure``: time 5 steps of the tiny model here (1 thread) for this machine's FLOP rate.
    """
    preset = sweep_preset(name)
    runs = [(s, r, seed) for s in strategies for r in ([0.0] if s == "no_failure" else rates) for seed in seeds]
    runs = list(dict.fromkeys(runs))
    cfg = preset.trainer_config
    iterations = iterations or preset.iterations
    flops = _train_flops_per_iteration(cfg)
    params = _param_count(cfg)
    if cfg.get("d_model", 64) >= 512:
        steps = sum(min(iterations, PAPER_STEPS.get(s, iterations)) for s, _, _ in runs)
        basis = "the paper's iterations to target per strategy (docs/ANCHORS.md), capped at --iterations"
    else:
        steps = len(runs) * iterations * preset.max_steps_factor
        basis = f"{iterations} iterations x max_steps_factor {preset.max_steps_factor} per run (an upper bound)"
    total_flops = flops * steps
    gpu_h = total_flops / (A100_PEAK_FLOPS * ASSUMED_MFU) / 3600
    lines = [
        f"preset: {preset.summary}",
        f"runs: {len(runs)} ({len(strategies)} strategies x {len(rates)} rates x {len(seeds)} seeds, "
        f"no_failure once per seed)",
        f"trained model: {params / 1e6:.1f} M parameters, {cfg.get('n_stages', 4)} stages x "
        f"{cfg.get('layers_per_stage', 1)} layers, d {cfg.get('d_model', 64)}; "
        f"{flops / 1e12:.3g} TFLOP per iteration (3 x forward)",
        f"train steps: {steps:,.0f} ({basis})",
        f"compute: {total_flops / 1e18:.3g} EFLOP = {gpu_h:,.0f} A100-hours at {ASSUMED_MFU:.0%} MFU "
        f"(312 TFLOP/s bf16 peak); memory per run ~{params * 16 / 1e9:.1f} GB of weights, grads and Adam "
        f"(fp32) plus activations",
    ]
    if measure:
        rate, step_s = _measured_flops_per_s_here()
        here_s = total_flops / rate
        lines.append(f"here: this machine runs {rate / 1e9:.2f} GFLOP/s per core on the trainer (tiny model, "
                     f"1 thread, {step_s:.3f} s/step): {here_s / 3600 / 24 / 365.25:,.1f} core-years "
                     f"({here_s / 2 / 3600:,.0f} h on 2 cores)")
    if math.isfinite(gpu_h):
        per_run = gpu_h / max(1, len(runs))
        lines.append(f"per run: {per_run:,.1f} A100-hours, or {total_flops / len(runs) / 1e18:.3g} EFLOP on CPU cores; "
                     f"the trainer runs on CPU today (no accelerator placement in trainer/pipeline.py), so a GPU run "
                     f"needs that first (docs/fidelity.md section 5)")
        lines.append(f"Ray: `RAY_ADDRESS=... shardproof simulate sweep --preset {name} --executor ray --threads N "
                     f"--data OPENWEBTEXT_DIR --out DIR`: one run per Ray task of N CPUs, results resumable")
    return "\n".join(lines)
