"""A small fake trainer and fake strategies implementing the harness contract (no torch).

The fake trainer's loss is a deterministic function of its "knowledge" k (iterations of
progress): loss = 1 + 4 exp(-k / 20). A failure without repair would cost knowledge; each
fake strategy repairs in its own way and returns the contract's actions, so the simulator's
clock and pricing can be tested without training a model. ``step_sleep_s`` in the trainer
config (or the FAKE_STEP_SLEEP_S environment variable, which reaches spawned pool workers)
slows train_step down for the kill-and-resume test.

Used as ``backend="fake_backend:BACKEND"`` with this directory on sys.path.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Any

from simulator.run import Backend
from trainer.api import StepResult
from trainer.errors import StrategyError
from trainer.strategies.base import Restart, Rollback, StorageRead, StorageWrite, Transfer

STAGE_FORWARD_S = 0.01
STAGE_BACKWARD_S = 0.02
PARAM_BYTES = 1_000_000
ACTIVATION_BYTES = 65_536


class FakeTrainer:
    """Contract-shaped trainer; ``n_stages`` transformer stages plus the embedding stage 0."""

    def __init__(self, cfg: dict[str, Any]):
        self.n_stages = int(cfg.get("n_stages", 4))
        self.step_sleep_s = float(cfg.get("step_sleep_s", os.environ.get("FAKE_STEP_SLEEP_S", 0.0)))
        self.knowledge = 0.0
        self.iteration = 0
        self.steps = 0

    def _loss(self) -> float:
        return 1.0 + 4.0 * math.exp(-self.knowledge / 20.0)

    def train_step(self) -> StepResult:
        if self.step_sleep_s:
            time.sleep(self.step_sleep_s)
        self.knowledge += 1.0
        self.iteration += 1
        self.steps += 1
        return StepResult(loss=self._loss(), grad_norms=(1.0,) * (self.n_stages + 1), tokens=64)

    def evaluate(self, n_batches: int = 4) -> float:
        return self._loss()

    def stage_param_bytes(self, stage: int) -> int:
        return PARAM_BYTES

    def stage_optimizer_bytes(self, stage: int) -> int:
        return 2 * PARAM_BYTES

    def activation_bytes(self) -> int:
        return ACTIVATION_BYTES

    def measure_stage_times(self, repeats: int = 3):
        return tuple((STAGE_FORWARD_S, STAGE_BACKWARD_S) for _ in range(self.n_stages + 1))

    def snapshot(self):
        return (self.knowledge, self.iteration)

    def restore(self, snap) -> None:
        self.knowledge, self.iteration = snap


@dataclass
class FakeStrategy:
    """Parametrised fake: how much knowledge a failure costs and which actions it returns."""

    name: str
    damage: float = 0.0  # fraction of knowledge lost per failed stage
    multiplier: float = 1.0
    swap: bool = False
    checkpoint_every: int = 0
    trainer: FakeTrainer | None = None

    def attach(self, trainer: FakeTrainer) -> None:
        self.trainer = trainer
        self._ckpt = trainer.snapshot()

    def forward_multiplier(self, stage: int) -> float:
        return self.multiplier

    def swap_on_odd_microbatches(self) -> bool:
        return self.swap

    def on_failure(self, stages, iteration: int):
        t = self.trainer
        actions: list[Any] = []
        for s in stages:
            actions.append(Restart(s))
        if self.checkpoint_every:
            t.restore(self._ckpt)
            actions += [StorageRead(3 * PARAM_BYTES * (t.n_stages + 1)), Rollback(self._ckpt[1])]
            return actions
        for s in stages:
            t.knowledge *= 1.0 - self.damage
            actions.append(Transfer((s + 1) % (t.n_stages + 1), s, PARAM_BYTES))
        return actions

    def on_iteration_end(self, iteration: int, result: StepResult):
        if self.checkpoint_every and iteration % self.checkpoint_every == 0:
            self._ckpt = self.trainer.snapshot()
            return [StorageWrite(3 * PARAM_BYTES * (self.trainer.n_stages + 1))]
        return []

    def storage_bytes(self) -> int:
        return 3 * PARAM_BYTES * 5 if self.checkpoint_every else 0

    def describe(self) -> dict:
        return {"name": self.name, "fake": True}


def make_strategy(name: str, **knobs) -> FakeStrategy:
    table = {
        "no_failure": FakeStrategy("no_failure"),
        "checkfree": FakeStrategy("checkfree", damage=0.3),
        "checkfree_plus": FakeStrategy("checkfree_plus", damage=0.2, swap=True),
        "checkpoint": FakeStrategy("checkpoint", checkpoint_every=5),
        "redundant": FakeStrategy("redundant", multiplier=2.0),
    }
    if name not in table:
        raise StrategyError(f"unknown strategy {name!r}; known: {', '.join(table)}")
    strategy = table[name]
    for k, v in knobs.items():
        setattr(strategy, k, v)
    return strategy


BACKEND = Backend(make_trainer=FakeTrainer, make_strategy=make_strategy,
                  strategy_names=lambda: ("no_failure", "checkfree", "checkfree_plus", "checkpoint", "redundant"))


class ThreadProbeTrainer(FakeTrainer):
    """A fake trainer whose validation 'loss' is torch's intra-op thread count in the run's process."""

    def evaluate(self, n_batches: int = 4) -> float:
        import torch

        return float(torch.get_num_threads())


THREADS = Backend(make_trainer=ThreadProbeTrainer, make_strategy=make_strategy, strategy_names=BACKEND.strategy_names)
