"""CheckFree+ (arXiv 2506.15461 section 4.2): swap schedule, partner copies, replicated embedding."""

from __future__ import annotations

import math

import pytest
import torch
from trainer_helpers import assert_fresh_adam, assert_stage_constant, assert_weights_equal, fill_stage, norms_result

from trainer.errors import StrategyError
from trainer.strategies import Restart, Transfer, make_strategy


def _attached(make_trainer, n_stages: int = 4, steps: int = 1, **knobs):
    t = make_trainer(n_stages=n_stages)
    s = make_strategy("checkfree_plus", **knobs)
    s.attach(t)
    for _ in range(steps):
        s.on_iteration_end(t.iteration, t.train_step())
    return t, s


def test_attach_switches_the_trainer_to_the_swap_schedule(make_trainer):
    t, s = _attached(make_trainer, steps=0)
    assert s.swap_on_odd_microbatches() is True
    assert t.swap_odd_micro_batches is True
    assert t.stage_order(0) == (1, 2, 3, 4) and t.stage_order(1) == (2, 1, 4, 3)


def test_swap_schedule_changes_training_vs_plain_checkfree(make_trainer):
    plus_t, plus = _attached(make_trainer, steps=0)
    plain_t = make_trainer(n_stages=4)
    make_strategy("checkfree").attach(plain_t)
    assert plain_t.swap_odd_micro_batches is False
    assert plus_t.train_step().loss != plain_t.train_step().loss


@pytest.mark.parametrize("lost, partner", [(1, 2), (4, 3)])
def test_lost_outer_stage_is_a_copy_of_its_swap_partner(make_trainer, lost, partner):
    t, s = _attached(make_trainer, steps=2)
    expected = t.stage_weights(partner)
    actions = s.on_failure([lost], iteration=2)
    assert_weights_equal(t, lost, expected)
    assert_fresh_adam(t, lost, 1.1 * t.config.lr)
    assert actions == [Restart(lost), Transfer(partner, lost, t.stage_param_bytes(lost))]


@pytest.mark.parametrize("n_stages, partners", [(2, {1: 2, 2: 1}), (3, {1: 2, 3: 1}), (6, {1: 2, 6: 5})])
def test_partners_for_any_stage_count(make_trainer, n_stages, partners):
    t, s = _attached(make_trainer, n_stages=n_stages, steps=1)
    for lost, partner in partners.items():
        assert s.partner(lost) == partner
        expected = t.stage_weights(partner)
        s.on_failure([lost], iteration=1)
        assert_weights_equal(t, lost, expected)


def test_middle_stage_is_averaged_like_checkfree(make_trainer):
    t, s = _attached(make_trainer, n_stages=5)
    fill_stage(t, 2, 2.0)
    fill_stage(t, 4, 6.0)
    s.on_iteration_end(1, norms_result((1.0, 1.0, 0.1, 1.0, 0.3, 1.0)))
    s.on_failure([3], iteration=1)
    a, b = 0.3 + 1e-4, 0.1 + 1e-4
    assert_stage_constant(t, 3, (a * 6.0 + b * 2.0) / (a + b))
    assert t.lr_scale(3) == 1.1


def test_copy_swap_partners_option_copies_stage_2_from_stage_1(make_trainer):
    t, s = _attached(make_trainer, n_stages=5, copy_swap_partners=True)
    fill_stage(t, 1, 2.0)
    fill_stage(t, 3, 6.0)
    s.on_failure([2], iteration=1)
    assert_stage_constant(t, 2, 2.0)  # published code: `elif i == 2: copy stages[1]`


def test_partner_lost_too_falls_back_inward(make_trainer):
    t, s = _attached(make_trainer, n_stages=5)
    fill_stage(t, 3, 3.0)
    actions = s.on_failure([1, 2], iteration=1)
    assert_stage_constant(t, 1, 3.0)  # partner 2 lost -> nearest alive inward is 3
    assert Transfer(3, 1, t.stage_param_bytes(1)) in actions


def test_embedding_stage_restored_from_replica(make_trainer):
    t, s = _attached(make_trainer, steps=2)
    replica = t.stage_weights(0)  # refreshed at the end of iteration 2
    nbytes = t.stage_param_bytes(0)
    assert s.storage_bytes() == 2 * nbytes
    actions = s.on_failure([0], iteration=2)
    assert_weights_equal(t, 0, replica)
    assert_fresh_adam(t, 0, t.config.lr)
    assert actions == [Restart(0), Transfer(1, 0, nbytes)]
    actions = s.on_failure([0, 1], iteration=2)  # holder 1 lost too: the copy on stage S serves
    assert_weights_equal(t, 0, replica)
    assert Transfer(4, 0, nbytes) in actions


def test_replica_refresh_costs_two_transfers_per_sync(make_trainer):
    t, s = _attached(make_trainer, steps=0, replica_sync_every=2)
    nbytes = t.stage_param_bytes(0)
    assert s.on_iteration_end(0, t.train_step()) == []
    refresh = s.on_iteration_end(1, t.train_step())
    assert refresh == [Transfer(0, 1, nbytes), Transfer(0, 4, nbytes)]
    # issue 15: priced as the paper does, overlapped with training, unless configured otherwise
    assert [(a.of_stages, a.optimizer, a.background) for a in refresh] == [((0,), False, True)] * 2
    _, blocking = _attached(make_trainer, steps=0, replica_sync="blocking")
    assert [a.background for a in blocking.on_iteration_end(1, t.train_step())] == [False, False]
    with pytest.raises(StrategyError, match="replica_sync must be 'background' or 'blocking'"):
        make_strategy("checkfree_plus", replica_sync="sometimes")


def test_embedding_stage_with_both_holders_lost_is_reinitialised(make_trainer):
    t, s = _attached(make_trainer)
    s.on_failure([0, 1, 4], iteration=1)
    assert torch.isfinite(t.stage_weights(0)["tok_embedding"]).all()
    r = t.train_step()
    assert math.isfinite(r.loss)
