"""The paper's strategies as planners (trainer/strategies/paper_plans.py) act exactly like the originals.

Both run on twin trainers through the same failures (single, adjacent, outer, embedding stage, all
at once); after every hook the actions must be equal and every stage's weights, Adam state and LR
scale bit-identical, and the losses equal. This is what lets the real multi-process run, which
only runs planners, stand for the strategies the simulator compares.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from trainer.strategies import make_strategy
from trainer.strategies.paper_plans import PAPER_PLANS, swapped_order

FAILURES = {  # iteration boundary -> stages lost there
    1: (2,),
    3: (2, 3),  # adjacent middle stages
    4: (1,),  # an outer stage
    6: (0,),  # the embedding stage
    7: (4, 5),  # adjacent, one outer
    9: (1, 2, 3, 4, 5),  # every transformer stage
    10: (0, 1, 5),  # stage 0 with both of CheckFree+'s replica holders
}

CASES = [
    ("checkfree", {}),
    ("checkfree", {"immune_outer_stages": False, "immune_embedding_stage": False}),
    ("checkfree_plus", {}),
    ("checkfree_plus", {"copy_swap_partners": True, "replica_sync_every": 2}),
    ("checkpoint", {"interval": 3}),
    ("checkpoint", {"interval": 3, "count": "progress"}),
    ("checkfree_plus", {"replica_sync": "blocking"}),
    ("redundant", {}),
    ("redundant", {"forward_cost": "double"}),
]


def _assert_same_state(a, b) -> None:
    assert a.iteration == b.iteration
    for stage in range(a.n_stages + 1):
        wa, wb = a.stage_weights(stage), b.stage_weights(stage)
        for name in wa:
            assert torch.equal(wa[name], wb[name]), (stage, name)
        assert a.lr_scale(stage) == b.lr_scale(stage), stage
        sa, sb = a.optimizer(stage).state_dict()["state"], b.optimizer(stage).state_dict()["state"]
        assert sa.keys() == sb.keys(), stage
        for idx in sa:
            for key in ("step", "exp_avg", "exp_avg_sq"):
                assert torch.equal(sa[idx][key], sb[idx][key]), (stage, idx, key)


def _content(actions):
    """Every field of the actions, those outside equality too (of_stages, optimizer, background)."""
    return [(type(a).__name__, dataclasses.asdict(a)) for a in actions]


@pytest.mark.parametrize(("name", "knobs"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_planner_matches_the_original(make_trainer, name, knobs):
    original, planned = make_trainer(n_stages=5), make_trainer(n_stages=5)
    s_orig = make_strategy(name, **knobs)
    s_plan = PAPER_PLANS[name](PAPER_PLANS[name].Config(**knobs))
    s_orig.attach(original)
    s_plan.attach(planned)
    assert s_orig.immune_stages() == s_plan.immune_stages()
    assert s_orig.swap_on_odd_microbatches() == s_plan.swap_on_odd_microbatches()
    assert [s_orig.forward_multiplier(s) for s in range(6)] == [s_plan.forward_multiplier(s) for s in range(6)]
    assert [s_orig.redundant_forward_of(s) for s in range(6)] == [s_plan.redundant_forward_of(s) for s in range(6)]
    iteration = 0
    for boundary in range(12):
        if boundary in FAILURES:
            acts_o = s_orig.on_failure(list(FAILURES[boundary]), iteration)
            acts_p = s_plan.on_failure(list(FAILURES[boundary]), iteration)
            assert acts_o == acts_p, boundary
            assert _content(acts_o) == _content(acts_p), boundary  # what the simulator prices
            for act in acts_o:
                if type(act).__name__ == "Rollback":
                    iteration = act.to_iteration
            _assert_same_state(original, planned)
        ro, rp = original.train_step(), planned.train_step()
        iteration += 1
        assert ro.loss == rp.loss and ro.grad_norms == rp.grad_norms, boundary
        end_o, end_p = s_orig.on_iteration_end(iteration, ro), s_plan.on_iteration_end(iteration, rp)
        assert end_o == end_p, boundary
        assert _content(end_o) == _content(end_p), boundary
        _assert_same_state(original, planned)
    assert s_orig.storage_bytes() == s_plan.storage_bytes()


@pytest.mark.parametrize("n_stages", [2, 3, 4, 7])
def test_swapped_order_is_the_trainers(make_trainer, n_stages):
    t = make_trainer(n_stages=n_stages)
    t.swap_odd_micro_batches = True
    assert swapped_order(n_stages) == t.stage_order(1)


def test_no_failure_plan_rejects_failures(make_trainer):
    from trainer.errors import StrategyError

    t = make_trainer()
    s = PAPER_PLANS["no_failure"]()
    s.attach(t)
    with pytest.raises(StrategyError, match="failure-free reference"):
        s.on_failure([2], 0)
