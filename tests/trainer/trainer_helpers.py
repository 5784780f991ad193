"""Plain helpers of the trainer tests (fixtures live in conftest.py): corpus text, tiny config,
constant stage weights, Adam state checks, fake step results."""

from __future__ import annotations

import random

import torch

from trainer.api import StepResult

WORDS = ("the king queen lord speak thou art love night day sword crown death heart fair sweet good "
         "noble what shall we do my liege o gentle friend come hither go away").split()

TINY = dict(n_stages=4, layers_per_stage=1, d_model=16, n_heads=2, n_kv_heads=1, ffn_hidden=32,
            context=16, micro_batch_size=2, n_micro_batches=2, vocab_size=300, lr=3e-3)


def synthetic_text(n_lines: int = 2500, seed: int = 0) -> str:
    """Seeded pseudo-English lines (about 40k tokens at V = 300)."""
    rng = random.Random(seed)
    return "\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))).capitalize() + "."
                     for _ in range(n_lines))


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
