"""TrainerConfig validation (one-line TrainerError) and the contract's fields."""

from __future__ import annotations

import dataclasses

import pytest

from trainer.api import StepResult, TrainerConfig
from trainer.errors import TrainerError

CONTRACT_FIELDS = ["n_stages", "layers_per_stage", "d_model", "n_heads", "n_kv_heads", "ffn_hidden", "context",
                   "micro_batch_size", "n_micro_batches", "lr", "lr_schedule", "warmup_iters", "total_iters",
                   "grad_clip", "vocab_size", "seed", "data"]


def test_fields_and_defaults_follow_the_contract():
    assert [f.name for f in dataclasses.fields(TrainerConfig)] == CONTRACT_FIELDS
    c = TrainerConfig()
    assert (c.n_stages, c.layers_per_stage, c.d_model, c.n_heads, c.n_kv_heads, c.ffn_hidden) == (4, 1, 64, 4, 2, 172)
    assert (c.context, c.micro_batch_size, c.n_micro_batches, c.lr, c.lr_schedule) == (64, 8, 4, 3e-3, "constant")
    assert (c.warmup_iters, c.total_iters, c.grad_clip, c.vocab_size, c.seed, c.data) == (0, 1000, 1.0, 1024, 0, None)
    assert c.tokens_per_iteration == 4 * 8 * 64
    assert [f.name for f in dataclasses.fields(StepResult)] == ["loss", "grad_norms", "tokens"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.lr = 1.0  # type: ignore[misc]


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_stages=1), "n_stages must be >= 2"),
    (dict(d_model=0), "d_model must be a positive int"),
    (dict(d_model=30, n_heads=4), "not divisible by n_heads"),
    (dict(d_model=12, n_heads=4), "must be even for RoPE"),
    (dict(n_heads=4, n_kv_heads=3), "not divisible by n_kv_heads"),
    (dict(lr=0.0), "lr must be > 0"),
    (dict(lr_schedule="linear"), "unknown lr_schedule 'linear'; known: constant, cosine"),
    (dict(warmup_iters=-1), "warmup_iters must be >= 0"),
    (dict(grad_clip=0.0), "grad_clip must be > 0"),
    (dict(vocab_size=100), "vocab_size 100 must be >= 257"),
    (dict(micro_batch_size=2.5), "micro_batch_size must be a positive int"),
])
def test_bad_config_is_one_line_trainer_error(kwargs, match):
    with pytest.raises(TrainerError, match=match) as info:
        TrainerConfig(**kwargs)
    assert "\n" not in str(info.value)
