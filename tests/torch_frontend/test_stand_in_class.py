"""What torch 2.13's composable APIs leave on a module, as the stand-in of ``fully_shard`` /
``replicate`` leaves it (round 47a): one made class per user class whose methods act on
``self`` (``fsdp_methods._as_fsdp_module``, R47a-1), ``contract``'s registry and state
(``contract_state.py``, R47a-2 / R47a-3), and the refusal of ``.grad`` on the stand-in's
registered parameter views (``fsdp_grads.unsharded_grad_reads_refused``, R47a-5). Plain modules,
no process group; the end-to-end proves are the slow tests of ``tests/adversarial/
test_round47a.py``."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.distributed._composable.contract import REGISTRY_KEY, STATE_KEY, _get_registry
from torch.distributed.fsdp import FSDPModule
from torch.distributed.fsdp._fully_shard._fsdp_state import FSDPState
from torch.distributed.fsdp._fully_shard._fully_shard import fully_shard

from spec_lang.errors import PlanError
from spec_lang.torch_frontend import fsdp_grads
from spec_lang.torch_frontend.contract_state import apply_contract, registry_of
from spec_lang.torch_frontend.fsdp_methods import _as_fsdp_module, own_class


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)


def test_one_made_class_per_user_class_methods_act_on_self():
    """Two modules of one class share ``FSDPBlock`` (torch's ``cls_to_fsdp_cls``); a method
    called through the class on the other module records on the other module's unit."""
    a, b = Block(), Block()
    seen = []
    _as_fsdp_module(a, methods={"set_gradient_divide_factor": lambda s, f: seen.append(("a", f))})
    _as_fsdp_module(b, methods={"set_gradient_divide_factor": lambda s, f: seen.append(("b", f))})
    assert type(a) is type(b) and isinstance(a, FSDPModule) and own_class(a) is Block
    assert type(a).__name__ == "FSDPBlock" and "set_gradient_divide_factor" not in vars(a)
    type(a).set_gradient_divide_factor(b, 1.0)
    a.set_gradient_divide_factor(2.0)
    assert seen == [("b", 1.0), ("a", 2.0)]


def test_a_method_on_a_module_no_wrapper_recorded_is_refused():
    a, c = Block(), Block()
    _as_fsdp_module(a, methods={"reshard": lambda s: None})
    c.__class__ = type(a)            # the class, without the stand-in's record of c
    with pytest.raises(PlanError, match=r"reshard\(\) on a module .* R47a-1"):
        c.reshard()


def test_contract_writes_registry_and_a_state_of_torchs_class():
    m = Block()
    apply_contract([m], fully_shard, FSDPState, "train.py:9")
    assert list(_get_registry(m)) == ["fully_shard"] and "fully_shard" in registry_of(m)
    state = fully_shard.state(m)
    assert isinstance(state, FSDPState) and STATE_KEY in vars(m) and REGISTRY_KEY in vars(m)
    with pytest.raises(PlanError, match=r"train\.py:9: fully_shard\.state\(module\)\."
                                        r"_fsdp_param_groups: .* R47a-3"):
        state._fsdp_param_groups  # noqa: B018 -- the read is the test
    with pytest.raises(PlanError, match=r"train\.py:9: fully_shard\(\) on a module .* already"):
        apply_contract([m], fully_shard, FSDPState, "train.py:9")


def test_contract_of_a_group_shares_one_state():
    a, b = Block(), Block()
    apply_contract([a, b], fully_shard, FSDPState, "train.py:3")
    assert fully_shard.state(a) is fully_shard.state(b)
    assert registry_of(Block()) == {}


def test_grad_of_a_registered_view_refused_in_the_step_only():
    """Reading or setting ``.grad`` of a registered view raises inside the context, naming the
    train file; a leaf, another non-leaf, and the view after the context are read as usual."""
    w = torch.ones(3, requires_grad=True)
    view, other = w * 1, w * 2
    fsdp_grads.register_view(view)
    with fsdp_grads.unsharded_grad_reads_refused(__file__):
        assert w.grad is None and other.retain_grad() is None and other.grad is None
        with pytest.raises(PlanError, match=r"test_stand_in_class\.py:\d+: the step reads or "
                                            r"sets \.grad .* R47a-5"):
            view.grad  # noqa: B018 -- the read is the test
        with pytest.raises(PlanError, match="R47a-5"):
            view.grad = torch.zeros(3)
        for what in ("_grad", "is_leaf", "grad_fn"):      # R47d-1 / R47d-2
            with pytest.raises(PlanError, match=rf"reads or sets \.{what} .* R47a-5"):
                getattr(view, what)
        assert isinstance(view, nn.Parameter) and not isinstance(other, nn.Parameter)
        assert other.grad_fn is not None and not other.is_leaf and w.is_leaf
    assert not {"grad", "_grad", "is_leaf", "grad_fn"} & set(torch.Tensor.__dict__)
    assert view.grad_fn is not None
    (view.sum() + other.sum()).backward()
    assert torch.equal(w.grad, torch.full((3,), 3.0))
