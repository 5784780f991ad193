"""Helpers of the strategy tests: constant stage weights, Adam state checks, fake step results."""

from __future__ import annotations

import torch

from trainer.api import StepResult


def fill_stage(trainer, stage: int, value: float) -> None:
    """Every parameter of `stage` := value."""
    trainer.set_stage_weights(stage, {k: torch.full_like(v, value) for k, v in trainer.stage_weights(stage).items()})


def assert_stage_constant(trainer, stage: int, value: float, rel: float = 1e-6) -> None:
    for name, w in trainer.stage_weights(stage).items():
        torch.testing.assert_close(w, torch.full_like(w, value), rtol=rel, atol=0.0, msg=name)


def assert_weights_equal(trainer, stage: int, expected: dict[str, torch.Tensor]) -> None:
    got = trainer.stage_weights(stage)
    assert got.keys() == expected.keys()
    for name, w in got.items():
        assert torch.equal(w, expected[name]), name


def assert_fresh_adam(trainer, stage: int, lr: float) -> None:
    """No Adam state (moments zero, step 0) until the next step; LR = lr; then step 1 with fresh moments."""
    opt = trainer.optimizer(stage)
    assert len(opt.state) == 0
    assert opt.param_groups[0]["lr"] == lr


def norms_result(norms: tuple[float, ...]) -> StepResult:
    return StepResult(loss=0.0, grad_norms=norms, tokens=0)
