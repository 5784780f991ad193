"""A stage inside its own process (StageRuntime), without processes: init, packing, checkpoints."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trainer.api import TrainerConfig
from trainer.distributed.stage_runtime import StageRuntime, flat_numel
from trainer.pipeline import PipelineTrainer
from trainer.strategies.plan import combine, part_bytes


def _runtime(tiny, cache, stage, initial=True):
    return StageRuntime(TrainerConfig(**tiny), stage, initial=initial, cache_dir=cache)


def _train_a_bit(rt, steps=2):
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        for p in rt.params:
            p.grad = torch.randn(p.shape, generator=g)
        rt.step(1e-2)


@pytest.mark.parametrize("stage", [0, 1, 3])
def test_initial_weights_are_the_in_process_trainers(tiny, cache, stage):
    trainer = PipelineTrainer(TrainerConfig(**tiny), cache_dir=cache)
    rt = _runtime(tiny, cache, stage)
    expected = trainer.stage_weights(stage)
    for name, w in rt.module.state_dict().items():
        assert torch.equal(w, expected[name]), name


def test_replacement_starts_empty(tiny, cache):
    rt = _runtime(tiny, cache, 2, initial=False)
    assert all(torch.isnan(p).all() for p in rt.params) and not rt.optimizer.state


@pytest.mark.parametrize("stage", [0, 2])
def test_pack_unpack_is_exact_and_sized_like_the_contract(tiny, cache, stage):
    rt = _runtime(tiny, cache, stage)
    _train_a_bit(rt)
    rt.lr_scale = 1.1
    full, weights = rt.pack("full"), rt.pack("weights")
    trainer = PipelineTrainer(TrainerConfig(**tiny), cache_dir=cache)
    assert 4 * (full.numel() - 2) == part_bytes(trainer, stage, "full")  # + the LR scale's two words
    assert 4 * (weights.numel() - 2) == part_bytes(trainer, stage, "weights")
    assert full.numel() == flat_numel(rt.module, "full") == rt.numel(stage, "full")
    other = _runtime(tiny, cache, stage, initial=False)
    other.unpack(combine([full], [1.0], 1.0), "full", "moved", None)
    assert torch.equal(other.pack("full"), full) and other.lr_scale == 1.1
    for p, q in zip(rt.params, other.params):
        s, t = rt.optimizer.state[p], other.optimizer.state[q]
        assert float(s["step"]) == float(t["step"]) == 2.0
        assert torch.equal(s["exp_avg"], t["exp_avg"]) and torch.equal(s["exp_avg_sq"], t["exp_avg_sq"])
    fresh = _runtime(tiny, cache, stage, initial=False)
    fresh.unpack(weights, "weights", "fresh", 1.5)
    assert torch.equal(fresh.pack("weights")[:-2], weights[:-2]) and not fresh.optimizer.state
    assert fresh.lr_scale == 1.5


def test_held_copies_and_checkpoint_files(tiny, cache, tmp_path):
    rt = _runtime(tiny, cache, 1)
    _train_a_bit(rt)
    zero = _runtime(tiny, cache, 0)
    rt.hold(0, "full", zero.pack("full"))
    w0 = rt.copy_of(0, "weights")
    assert torch.equal(w0[:-2], zero.pack("weights")[:-2])
    with pytest.raises(KeyError):
        rt.copy_of(2, "weights")
    nbytes = rt.save(tmp_path / "stage1.npy")
    assert nbytes == 4 * rt.numel(1, "full")
    assert not list(tmp_path.glob("*.tmp"))  # written under a temporary name, then renamed
    loaded = np.load(tmp_path / "stage1.npy", allow_pickle=False)
    assert loaded.dtype == np.float32
    other = _runtime(tiny, cache, 1, initial=False)
    other.load(tmp_path / "stage1.npy")
    assert torch.equal(other.pack("full"), rt.pack("full"))


def test_clip_reports_the_post_clipping_norm(tiny, cache):
    rt = _runtime(tiny, cache, 2)
    for p in rt.params:
        p.grad = torch.full_like(p, 10.0)
    n = sum(p.numel() for p in rt.params)
    assert rt.clip() == pytest.approx(1.0, abs=1e-6)  # norm 10 sqrt(n) > 1: clipped to grad_clip = 1
    for p in rt.params:
        p.grad = torch.full_like(p, 1e-3)
    assert rt.clip() == pytest.approx(1e-3 * n ** 0.5, rel=1e-5)
