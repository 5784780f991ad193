"""Registry, base-class checks and the failure-free reference."""

from __future__ import annotations

import dataclasses

import pytest

from trainer.errors import StrategyError, TrainerError
from trainer.strategies import (
    NEW_STRATEGIES,
    PAPER_STRATEGIES,
    STRATEGIES,
    PlannedStrategy,
    RecoveryStrategy,
    make_planned_strategy,
    make_strategy,
)


def test_registry_names():
    assert set(STRATEGIES) == {"no_failure", "checkfree", "checkfree_plus", "checkpoint", "redundant",
                               "checkfree_adam", "neighbour_copy", "gemini", "adaptive"}
    assert set(PAPER_STRATEGIES) | set(NEW_STRATEGIES) == set(STRATEGIES)
    for name, cls in STRATEGIES.items():
        assert issubclass(cls, RecoveryStrategy) and cls.name == name
        assert dataclasses.is_dataclass(cls.Config)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(cls.Config(), "x", 1)


def test_unknown_strategy_and_knob():
    with pytest.raises(StrategyError, match=r"unknown strategy 'oobleck'; known: adaptive, checkfree, checkfree_adam, "
                                            r"checkfree_plus, checkpoint, gemini, neighbour_copy, no_failure, redundant"):
        make_strategy("oobleck")
    with pytest.raises(StrategyError, match=r"unknown strategy 'oobleck'"):
        make_planned_strategy("oobleck")
    with pytest.raises(StrategyError, match="has no knob 'lr'"):
        make_strategy("checkfree", lr=1.0)
    assert issubclass(StrategyError, TrainerError)


def test_no_failure_refuses_failures(make_trainer):
    t = make_trainer()
    s = make_strategy("no_failure")
    s.attach(t)
    assert s.on_failure([], iteration=0) == []
    with pytest.raises(StrategyError, match=r"failure-free reference; got failure of stages \[2\]"):
        s.on_failure([2], iteration=0)
    assert s.forward_multiplier(1) == 1.0 and s.storage_bytes() == 0


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_every_strategy_validates_stages_and_attachment(make_trainer, name):
    s = make_strategy(name)
    with pytest.raises(StrategyError, match="not attached"):
        s.on_failure([1], iteration=0)
    t = make_trainer()
    s.attach(t)
    with pytest.raises(StrategyError, match="out of range 0..4"):
        s.on_failure([7], iteration=0)
    d = s.describe()
    assert d["name"] == name and isinstance(d["config"], dict) and isinstance(d["immune_stages"], list)


@pytest.mark.parametrize("name", ["checkfree", "checkfree_plus", "checkpoint", "redundant"])
def test_every_recovering_strategy_leaves_no_nan(make_trainer, name):
    t = make_trainer()
    s = make_strategy(name)
    s.attach(t)
    s.on_iteration_end(0, t.train_step())
    s.on_failure([0, 2, 3], iteration=1)
    for st in range(t.n_stages + 1):
        for w in t.stage_weights(st).values():
            assert not w.isnan().any(), (name, st)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_describe_is_json_and_numpy_stage_ids_are_accepted(make_trainer, name):
    import json

    import numpy as np

    t = make_trainer()
    s = make_strategy(name)
    s.attach(t)
    json.dumps(s.describe())
    if name != "no_failure":
        s.on_failure([np.int64(2)], iteration=0)


@pytest.mark.parametrize("n_stages", [2, 3])
@pytest.mark.parametrize("name, knobs", [
    ("checkfree", dict(immune_outer_stages=False, immune_embedding_stage=False)),
    ("checkfree_plus", {}),
    ("checkpoint", dict(interval=1)),
    ("redundant", {}),
])
def test_small_stage_counts_survive_any_failure_set(make_trainer, n_stages, name, knobs):
    import math

    t = make_trainer(n_stages=n_stages)
    s = make_strategy(name, **knobs)
    s.attach(t)
    failure_sets = [[st] for st in range(n_stages + 1)] + [list(range(n_stages + 1))]
    for failed in failure_sets:
        s.on_iteration_end(t.iteration, t.train_step())
        s.on_failure(failed, iteration=t.iteration)
        for st in range(n_stages + 1):
            assert all(not w.isnan().any() for w in t.stage_weights(st).values()), (failed, st)
    assert math.isfinite(t.train_step().loss)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_every_strategy_has_a_planner_with_the_same_knobs(name):
    planned = make_planned_strategy(name)
    assert isinstance(planned, PlannedStrategy) and planned.name == name
    assert [f.name for f in dataclasses.fields(planned.Config)] == \
        [f.name for f in dataclasses.fields(STRATEGIES[name].Config)]
