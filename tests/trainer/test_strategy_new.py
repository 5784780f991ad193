"""The strategies of issue 16 in-process: checkfree_adam, neighbour_copy, gemini, adaptive.

Expected values are computed by hand from the definitions in each module's docstring (weighted
averages of constant stages, exact replays, Young/Daly intervals).
"""

from __future__ import annotations

import math

import pytest
import torch
from trainer_helpers import assert_stage_constant, assert_weights_equal, fill_stage, norms_result

from trainer.errors import StrategyError
from trainer.strategies import Restart, Rollback, Transfer, make_strategy
from trainer.strategies.checkpoint import young_daly_interval


def _attached(make_trainer, name, steps=2, n_stages=5, **knobs):
    t = make_trainer(n_stages=n_stages)
    s = make_strategy(name, **knobs)
    s.attach(t)
    for _ in range(steps):
        _step(t, s)
    return t, s


def _step(t, s):
    result = t.train_step()
    return s.on_iteration_end(t.iteration, result)


def _fill_adam(t, stage, value):
    for st in t.optimizer(stage).state.values():
        st["exp_avg"].fill_(value)
        st["exp_avg_sq"].fill_(value * value)


def _adam_values(t, stage):
    states = list(t.optimizer(stage).state.values())
    return {float(s["exp_avg"].flatten()[0]) for s in states}, {float(s["exp_avg_sq"].flatten()[0]) for s in states}


def _full_bytes(t, stage):
    return t.stage_param_bytes(stage) + t.stage_optimizer_bytes(stage)


# --------------------------------------------------------------------------- checkfree_adam
def test_checkfree_adam_averages_weights_and_moments(make_trainer):
    t, s = _attached(make_trainer, "checkfree_adam")
    fill_stage(t, 2, 1.0)
    fill_stage(t, 4, 3.0)
    _fill_adam(t, 2, 0.1)
    _fill_adam(t, 4, 0.5)
    s.on_iteration_end(2, norms_result((0.9, 0.3, 0.25, 0.7, 0.5, 0.1)))
    actions = s.on_failure([3], iteration=2)
    a, b = 0.5 + 1e-4, 0.25 + 1e-4  # CheckFree's weights: upper neighbour 4, lower 2
    assert_stage_constant(t, 3, (a * 3.0 + b * 1.0) / (a + b))
    m, v = _adam_values(t, 3)
    assert sorted(m) == pytest.approx([(a * 0.5 + b * 0.1) / (a + b)], abs=1e-7)
    assert sorted(v) == pytest.approx([(a * 0.25 + b * 0.01) / (a + b)], abs=1e-7)
    assert {float(st["step"]) for st in t.optimizer(3).state.values()} == {2.0}
    assert t.lr_scale(3) == 1.1
    assert actions == [Restart(3), Transfer(4, 3, _full_bytes(t, 3)), Transfer(2, 3, _full_bytes(t, 3))]


def test_checkfree_adam_bump_decays_linearly(make_trainer):
    t, s = _attached(make_trainer, "checkfree_adam", bump_decay_iters=4)
    s.on_failure([3], iteration=2)
    scales = []
    for _ in range(5):
        _step(t, s)
        scales.append(t.lr_scale(3))
    assert scales == pytest.approx([1.075, 1.05, 1.025, 1.0, 1.0], abs=1e-12)


def test_checkfree_adam_outer_stage_copies_its_neighbour_and_embedding_reinits(make_trainer):
    t, s = _attached(make_trainer, "checkfree_adam")
    before2 = t.stage_weights(2)
    actions = s.on_failure([0, 1], iteration=2)
    assert_weights_equal(t, 1, before2)  # one alive transformer neighbour: a copy of it
    assert torch.isfinite(t.stage_weights(0)["head"]).all()
    assert actions == [Restart(0), Restart(1), Transfer(2, 1, _full_bytes(t, 1))]
    assert s.immune_stages() == frozenset()


# --------------------------------------------------------------------------- neighbour_copy
@pytest.mark.parametrize("lost", [(3,), (2, 3), (0, 1), (0, 5)])
def test_neighbour_copy_refreshed_every_iteration_is_lossless(make_trainer, lost):
    t, s = _attached(make_trainer, "neighbour_copy")
    ref = make_trainer(n_stages=5)
    for _ in range(2):
        ref.train_step()
    s.on_failure(list(lost), iteration=2)
    assert [t.train_step().loss for _ in range(2)] == [ref.train_step().loss for _ in range(2)]


def test_neighbour_copy_actions_and_storage(make_trainer):
    t, s = _attached(make_trainer, "neighbour_copy", steps=0)
    acts = s.on_iteration_end(1, t.train_step())
    expected = [Transfer(st, h, _full_bytes(t, st)) for st in range(6) for h in ((st - 1) % 6, (st + 1) % 6)]
    assert acts == expected
    assert s.storage_bytes() == 2 * sum(_full_bytes(t, st) for st in range(6))
    actions = s.on_failure([3], iteration=1)
    # restore from the predecessor's copy, then the replacement takes its copies of stages 2 and 4
    assert actions == [Restart(3), Transfer(2, 3, _full_bytes(t, 3)), Transfer(2, 3, _full_bytes(t, 2)),
                       Transfer(4, 3, _full_bytes(t, 4))]


def test_neighbour_copy_restores_the_stale_copy(make_trainer):
    t, s = _attached(make_trainer, "neighbour_copy", steps=0, refresh_every=3)
    states = {}
    for _ in range(5):
        s.on_iteration_end(t.iteration + 1, t.train_step())
        states[t.iteration] = t.stage_state(2)
    s.on_failure([2], iteration=5)  # last refresh after iteration 3
    assert_weights_equal(t, 2, states[3].weights)
    assert s.describe()["refresh_interval"] == 3


def test_neighbour_copy_three_adjacent_lost_middle_averaged_from_restored(make_trainer):
    t, s = _attached(make_trainer, "neighbour_copy")
    s.on_iteration_end(2, norms_result((1.0, 0.2, 0.3, 0.4, 0.6, 1.0)))
    before = {st: t.stage_weights(st) for st in (2, 4)}
    actions = s.on_failure([2, 3, 4], iteration=2)
    assert_weights_equal(t, 2, before[2])
    assert_weights_equal(t, 4, before[4])
    a, b = 0.6 + 1e-4, 0.3 + 1e-4  # norms of the restored neighbours 4 (upper) and 2 (lower)
    for name, w in t.stage_weights(3).items():
        torch.testing.assert_close(w, (a * before[4][name] + b * before[2][name]) / (a + b), rtol=0, atol=1e-7)
    assert actions[:5] == [Restart(2), Restart(3), Restart(4), Transfer(1, 2, _full_bytes(t, 2)),
                           Transfer(5, 4, _full_bytes(t, 4))]
    assert actions[5:7] == [Transfer(4, 3, _full_bytes(t, 3)), Transfer(2, 3, _full_bytes(t, 3))]
    assert t.lr_scale(3) == 1.1 and t.lr_scale(2) == 1.0


def test_neighbour_copy_auto_interval_and_bad_knobs():
    s = make_strategy("neighbour_copy", refresh_every="auto", copy_s=0.5, mtbf_s=400.0, iteration_s=2.0)
    assert s.config.refresh_every == "auto"
    with pytest.raises(StrategyError, match="needs copy_s > 0"):
        make_strategy("neighbour_copy", refresh_every="auto")
    with pytest.raises(StrategyError, match="holders must be 1 or 2"):
        make_strategy("neighbour_copy", holders=3)
    assert young_daly_interval(0.5, 400.0, 2.0) == 10  # sqrt(2 * 0.5 * 400) = 20 s = 10 iterations


# --------------------------------------------------------------------------- gemini
def test_gemini_rolls_back_and_replays_bit_for_bit(make_trainer):
    t, s = _attached(make_trainer, "gemini", steps=0, interval=3)
    ref = make_trainer(n_stages=5)
    losses = [ref.train_step().loss for _ in range(6)]
    for _ in range(5):
        s.on_iteration_end(t.iteration + 1, t.train_step())
    actions = s.on_failure([2, 3], iteration=5)
    assert t.iteration == 3 and Rollback(3) in actions
    assert [t.train_step().loss for _ in range(3)] == losses[3:6]


def test_gemini_costs_and_lost_copies(make_trainer):
    t, s = _attached(make_trainer, "gemini", steps=0, interval=1, holders=1)
    acts = s.on_iteration_end(1, t.train_step())
    assert acts == [Transfer(st, (st - 1) % 6, _full_bytes(t, st)) for st in range(6)]  # local copies are free
    actions = s.on_failure([2, 3], iteration=1)  # 3's only remote copy was on 2: re-initialised
    assert actions[:2] == [Restart(2), Restart(3)] and Transfer(1, 2, _full_bytes(t, 2)) in actions
    assert not any(isinstance(a, Transfer) and a.dst_stage == 3 and a.src_stage == 2 for a in actions[:5])
    assert torch.isfinite(t.stage_weights(3)["blocks.0.attn.wq"]).all()


# --------------------------------------------------------------------------- adaptive
def test_adaptive_interval_follows_the_observed_rate(make_trainer):
    t, s = _attached(make_trainer, "adaptive", steps=0, copy_s=0.02, iteration_s=0.1, prior_mtbf_iters=100.0,
                     max_staleness=30)
    rate0 = s.failure_rate()
    assert rate0 == pytest.approx(1 / 100)
    k0 = s.chosen_interval()
    assert k0 == young_daly_interval(0.02, 0.1 / rate0, 0.1)  # sqrt(2*0.02*10) = 0.63 s -> 6 iterations
    for _ in range(4):
        s.on_iteration_end(t.iteration + 1, t.train_step())
        s.on_failure([3], iteration=t.iteration)
    assert s.failure_rate() == pytest.approx(5 / 104)
    assert s.chosen_interval() < k0
    _, rare = _attached(make_trainer, "adaptive", steps=0, copy_s=2.0, iteration_s=0.1, prior_mtbf_iters=1e6)
    assert rare.chosen_interval() is None  # copies would be > 50 iterations stale: CheckFree-Adam mode
    act = rare.on_failure([3], iteration=0)
    assert act[0] == Restart(3) and len(act) >= 1
    assert rare.describe()["history"] == [] and math.isfinite(rare.failure_rate())


def test_adaptive_without_seconds_copies_every_iteration(make_trainer):
    t, s = _attached(make_trainer, "adaptive", steps=3)
    assert s.chosen_interval() == 1
    ref = make_trainer(n_stages=5)
    for _ in range(3):
        ref.train_step()
    s.on_failure([1, 2], iteration=3)
    assert t.train_step().loss == ref.train_step().loss
    with pytest.raises(StrategyError, match="both copy_s and iteration_s"):
        make_strategy("adaptive", copy_s=1.0)
