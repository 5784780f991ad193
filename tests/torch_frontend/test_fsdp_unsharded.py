"""``fsdp_unsharded``: FSDP2's unsharded parameter as one real leaf per sharded parameter for
the step (stop 48; rounds 48a-48d), on plain tensors with two stand-in ranks holding the same
shard (the collectives monkeypatched as in ``test_fsdp_hold``)."""

from __future__ import annotations

import types

import pytest
import torch
from torch import nn

from spec_lang.errors import PlanError
from spec_lang.torch_frontend import fsdp_unsharded as fu

N = 2


@pytest.fixture(autouse=True)
def collectives(monkeypatch):
    import torch.distributed._functional_collectives as funcol

    monkeypatch.setattr(funcol, "all_gather_tensor", lambda x, d, g: torch.cat([x] * N, d))
    monkeypatch.setattr(funcol, "reduce_scatter_tensor",
                        lambda x, op, d, g: N * x.chunk(N, d)[0])
    monkeypatch.setattr(funcol, "all_reduce", lambda x, op, g: N * x)
    monkeypatch.setattr(funcol, "wait_tensor", lambda x: x)


def _unit():
    return types.SimpleNamespace(kind="fsdp", fsdp_state=True, replicate_axes=(),
                                 group=lambda a: a, settings={"_site": "train.py:3"})


def _rec():
    stored = nn.Parameter(torch.arange(6, dtype=torch.float64).reshape(2, 3))
    return fu.unsharded_leaf(_unit(), stored, stored, 0, "dp")


def test_the_leaf_is_a_parameter_gathered_from_the_shard():
    rec = _rec()
    assert type(rec.leaf) is nn.Parameter and rec.leaf.is_leaf and rec.leaf.requires_grad
    assert torch.equal(rec.leaf.detach(), torch.cat([rec.stored.detach()] * N, 0))
    assert not getattr(rec.leaf, "_post_accumulate_grad_hooks", None)    # R48c-1


def test_a_write_into_the_shard_refills_the_same_leaf():
    rec = _rec()
    leaf = rec.leaf
    with torch.no_grad():
        rec.stored.mul_(2.0)
    assert fu.leaf_of([rec], rec.stored) is rec and rec.leaf is leaf     # R48a-1
    assert torch.allclose(leaf.detach(), torch.cat([rec.stored.detach()] * N, 0),
                          rtol=0, atol=1e-12)


def test_collect_reduces_the_leaf_gradient_and_frees_it():
    rec = _rec()
    (rec.leaf * 3.0).sum().backward()
    pending = {}
    fu.collect([rec], pending, free=True)
    assert rec.leaf.grad is None and rec.freed
    g = pending[id(rec.stored)][1]    # reduce-scatter of 3s over N ranks: N * 3
    assert torch.allclose(g, torch.full((2, 3), 3.0 * N, dtype=torch.float64), rtol=0, atol=1e-12)


def test_a_gradient_after_the_free_is_left_and_refused():
    rec = _rec()
    fu.collect([rec], {}, free=True)
    rec.leaf.sum().backward()
    pending = {}
    fu.collect([rec], pending)
    assert pending == {} and rec.leaf.grad is not None
    assert "R45c-2" in fu.left_over([rec], {id(rec.stored): "w.weight"})


@pytest.mark.parametrize("leave, what", [
    (lambda w: setattr(w, "grad", torch.ones_like(w)), "a .grad"),
    (lambda w: w.register_post_accumulate_grad_hook(lambda p: None), "a hook"),
    (lambda w: setattr(w, "tag", 1), "attribute 'tag'"),
    (lambda w: torch._C._set_neg(w, True), "layout"),
])
def test_what_the_step_leaves_on_the_leaf_is_named(leave, what):
    rec = _rec()
    assert fu.left_over([rec], {id(rec.stored): "w.weight"}) is None
    leave(rec.leaf)
    out = fu.left_over([rec], {id(rec.stored): "w.weight"})
    assert what in out and "w.weight" in out, out


def test_a_layout_changed_in_place_is_refused_at_the_next_gather():
    rec = _rec()
    torch._C._set_neg(rec.leaf, True)
    with pytest.raises(PlanError, match="R48c-2"):
        fu.leaf_of([rec], rec.stored)
