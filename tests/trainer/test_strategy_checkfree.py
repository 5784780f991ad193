"""CheckFree (arXiv 2506.15461 section 4.1): hand-computed weighted averages, fresh Adam, LR x1.1."""

from __future__ import annotations

import math

import pytest
import torch
from trainer_helpers import assert_fresh_adam, assert_stage_constant, assert_weights_equal, fill_stage, norms_result

from trainer.strategies import CheckFree, Restart, Transfer, make_strategy


def _attached(make_trainer, steps: int = 1, **knobs):
    t = make_trainer(n_stages=5)
    s = make_strategy("checkfree", **knobs)
    s.attach(t)
    for _ in range(steps):
        s.on_iteration_end(t.iteration, t.train_step())
    return t, s


def test_weighted_average_by_hand(make_trainer):
    t, s = _attached(make_trainer)
    fill_stage(t, 2, 1.0)  # W_{i-1}
    fill_stage(t, 4, 3.0)  # W_{i+1}
    s.on_iteration_end(1, norms_result((0.9, 0.3, 0.25, 0.7, 0.5, 0.1)))
    actions = s.on_failure([3], iteration=1)
    a, b = 0.5 + 1e-4, 0.25 + 1e-4  # a = ||g_4|| + 1e-4 weights W_4, b = ||g_2|| + 1e-4 weights W_2
    assert_stage_constant(t, 3, (a * 3.0 + b * 1.0) / (a + b))
    nbytes = t.stage_param_bytes(3)
    assert actions == [Restart(3), Transfer(4, 3, nbytes), Transfer(2, 3, nbytes)]
    assert_stage_constant(t, 2, 1.0)  # neighbours untouched
    assert_stage_constant(t, 4, 3.0)


def test_fresh_adam_and_lr_times_1_1(make_trainer):
    t, s = _attached(make_trainer, steps=2)
    assert len(t.optimizer(3).state) > 0
    s.on_failure([3], iteration=2)
    assert_fresh_adam(t, 3, 1.1 * t.config.lr)
    assert t.lr_scale(3) == 1.1
    before = t.stage_weights(3)
    t.train_step()
    # first Adam step from zero moments (step 1, bias-corrected): w -= lr * 1.1 * g / (|g| + eps)
    opt = t.optimizer(3)
    for name, p in t.stages[3].named_parameters():
        assert float(opt.state[p]["step"]) == 1.0
        g = p.grad
        expected = before[name] - 1.1 * t.config.lr * g / (g.abs() + 1e-8)
        torch.testing.assert_close(p.detach(), expected, rtol=1e-5, atol=1e-7, msg=name)
    assert t.optimizer(3).param_groups[0]["lr"] == pytest.approx(1.1 * t.config.lr)
    assert t.lr_scale(2) == 1.0  # other stages keep the base LR


def test_uses_real_post_clip_norms_of_the_previous_iteration(make_trainer):
    t, s = _attached(make_trainer)
    r = t.train_step()
    s.on_iteration_end(t.iteration, r)
    assert s.grad_norms == r.grad_norms
    w2, w4 = t.stage_weights(2), t.stage_weights(4)
    s.on_failure([3], iteration=t.iteration)
    a, b = r.grad_norms[4] + 1e-4, r.grad_norms[2] + 1e-4
    for name, w in t.stage_weights(3).items():
        torch.testing.assert_close(w, (a * w4[name] + b * w2[name]) / (a + b), rtol=1e-6, atol=1e-7)


def test_before_any_iteration_the_average_is_even(make_trainer):
    t, s = _attached(make_trainer, steps=0)
    fill_stage(t, 1, 2.0)
    fill_stage(t, 3, 4.0)
    s.on_failure([2], iteration=0)
    assert_stage_constant(t, 2, 3.0)  # published code: prev_gradient_norm starts at 1 -> 50/50


def test_outer_and_embedding_stages_are_immune_by_default(make_trainer):
    t, s = _attached(make_trainer)
    before = {st: t.stage_weights(st) for st in (0, 1, 5)}
    assert s.on_failure([0, 1, 5], iteration=1) == []
    for st, w in before.items():
        assert_weights_equal(t, st, w)
        assert len(t.optimizer(st).state) > 0
    d = s.describe()
    assert d["immune_stages"] == [0, 1, 5]
    assert "immune" in d["outer_stages"] and "immune" in d["embedding_stage"]


def test_outer_stage_reinitialised_when_not_immune(make_trainer):
    t, s = _attached(make_trainer, immune_outer_stages=False, immune_embedding_stage=False)
    before = t.stage_weights(5)
    assert s.on_failure([5], iteration=1) == [Restart(5)]
    after = t.stage_weights(5)
    w = after["blocks.0.attn.wq"]
    assert torch.isfinite(w).all()
    assert not torch.equal(w, before["blocks.0.attn.wq"])
    assert abs(w.std().item() - 0.02) < 0.005  # the model's init N(0, 0.02^2)
    assert (after["blocks.0.attn_norm.weight"] == 1.0).all()
    assert_fresh_adam(t, 5, t.config.lr)
    assert s.describe()["immune_stages"] == []
    assert s.on_failure([0], iteration=1) == [Restart(0)]
    assert torch.isfinite(t.stage_weights(0)["head"]).all()


def test_consecutive_failures_use_next_alive_stage_outward(make_trainer):
    t, s = _attached(make_trainer)
    for st, v in ((1, 1.0), (2, 5.0), (3, 7.0), (4, 9.0)):
        fill_stage(t, st, v)
    s.on_iteration_end(1, norms_result((1.0, 0.2, 0.3, 0.4, 0.6, 0.8)))
    actions = s.on_failure([2, 3], iteration=1)
    a, b = 0.6 + 1e-4, 0.2 + 1e-4  # both use alive stages 4 (above) and 1 (below)
    expected = (a * 9.0 + b * 1.0) / (a + b)
    assert_stage_constant(t, 2, expected)
    assert_stage_constant(t, 3, expected)
    n = t.stage_param_bytes(2)
    assert actions == [Restart(2), Transfer(4, 2, n), Transfer(1, 2, n), Restart(3), Transfer(4, 3, n), Transfer(1, 3, n)]


def test_one_sided_failure_copies_the_only_alive_neighbour(make_trainer):
    t, s = _attached(make_trainer, immune_outer_stages=False)
    fill_stage(t, 3, 4.0)
    actions = s.on_failure([1, 2], iteration=1)
    assert_stage_constant(t, 2, 4.0)
    assert t.lr_scale(2) == 1.1
    assert actions == [Restart(1), Restart(2), Transfer(3, 2, t.stage_param_bytes(2))]
    assert torch.isfinite(t.stage_weights(1)["blocks.0.mlp.w1"]).all()


def test_training_continues_after_recovery(make_trainer):
    t, s = _attached(make_trainer, steps=3)
    s.on_failure([2, 4], iteration=3)
    r = t.train_step()
    assert math.isfinite(r.loss) and all(math.isfinite(n) for n in r.grad_norms)


def test_config_validation():
    from trainer.errors import StrategyError

    with pytest.raises(StrategyError, match="lr_scale"):
        CheckFree.Config(lr_scale=0.0)
    with pytest.raises(StrategyError, match="norm_eps"):
        CheckFree.Config(norm_eps=-1.0)
