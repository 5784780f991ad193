"""Redundant computation (Bamboo): bit-exact restore of weights and Adam state from the predecessor."""

from __future__ import annotations

import pytest
import torch
from trainer_helpers import assert_weights_equal

from trainer.errors import StrategyError
from trainer.strategies import Restart, Transfer, make_strategy


def _attached(make_trainer, steps: int = 2, **knobs):
    t = make_trainer()
    s = make_strategy("redundant", **knobs)
    s.attach(t)
    for _ in range(steps):
        s.on_iteration_end(t.iteration, t.train_step())
    return t, s


def _assert_adam_equal(t, stage, expected_state):
    got = t.optimizer(stage).state_dict()
    assert got["state"].keys() == expected_state["state"].keys()
    for idx, st in expected_state["state"].items():
        for key in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(got["state"][idx][key], st[key]), (stage, idx, key)


@pytest.mark.parametrize("lost, holder", [(3, 2), (1, 0), (0, 4)])
def test_lossless_restore(make_trainer, lost, holder):
    t, s = _attached(make_trainer)
    before = t.stage_state(lost)
    actions = s.on_failure([lost], iteration=2)
    assert_weights_equal(t, lost, before.weights)
    _assert_adam_equal(t, lost, before.optimizer)
    assert t.lr_scale(lost) == before.lr_scale
    nbytes = t.stage_param_bytes(lost) + t.stage_optimizer_bytes(lost)
    assert actions == [Restart(lost), Transfer(holder, lost, nbytes)]
    assert actions[1].of_stages == (lost,) and actions[1].optimizer is True and not actions[1].background


def test_training_after_recovery_equals_training_without_failure(make_trainer):
    t, s = _attached(make_trainer)
    ref = make_trainer()
    for _ in range(2):
        ref.train_step()
    s.on_failure([2, 4], iteration=2)
    assert [t.train_step().loss for _ in range(2)] == [ref.train_step().loss for _ in range(2)]


def test_forward_cost_models_and_storage(make_trainer):
    t, s = _attached(make_trainer, steps=0)
    n = t.n_stages
    # "bamboo" (default): each stage names its successor (ring 0 -> 1 -> ... -> S -> 0) for the
    # simulator's event model and keeps its own forward time
    assert [s.redundant_forward_of(st) for st in range(n + 1)] == [*range(1, n + 1), 0]
    assert [s.forward_multiplier(st) for st in range(n + 1)] == [1.0] * (n + 1)
    refresh = s.on_iteration_end(1, t.train_step())
    assert [(a.src_stage, a.dst_stage, a.nbytes, a.of_stages, a.optimizer, a.background) for a in refresh] == [
        (st, s.holder(st), t.stage_param_bytes(st), (st,), False, True) for st in range(n + 1)]
    _, d = _attached(make_trainer, steps=0, forward_cost="double")
    assert [d.forward_multiplier(st) for st in range(n + 1)] == [2.0] * (n + 1)
    assert d.redundant_forward_of(1) is None and d.on_iteration_end(1, t.train_step()) == []
    with pytest.raises(StrategyError, match="forward_cost must be one of bamboo, double"):
        make_strategy("redundant", forward_cost="triple")
    assert s.storage_bytes() == sum(t.stage_param_bytes(st) + t.stage_optimizer_bytes(st)
                                    for st in range(t.n_stages + 1))


def test_stage_and_its_holder_lost_together(make_trainer):
    t, s = _attached(make_trainer)
    before2, before3 = t.stage_state(2), t.stage_state(3)
    actions = s.on_failure([2, 3], iteration=2)
    assert_weights_equal(t, 2, before2.weights)  # holder 1 alive: exact
    w3 = t.stage_weights(3)["blocks.0.mlp.w2"]
    assert torch.isfinite(w3).all() and not torch.equal(w3, before3.weights["blocks.0.mlp.w2"])
    assert actions == [Restart(2), Transfer(1, 2, t.stage_param_bytes(2) + t.stage_optimizer_bytes(2)), Restart(3)]
    t2, s2 = _attached(make_trainer, on_lost_replica="raise")
    with pytest.raises(StrategyError, match="stage 3 and its replica holder 2"):
        s2.on_failure([2, 3], iteration=2)
