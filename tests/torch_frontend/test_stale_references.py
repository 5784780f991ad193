"""References to the parameters and buffers the traced step replaced (round 44c, R44c-5;
``spec_lang/torch_frontend/step_state.py``, ``stale``): the capture puts fresh parameters into
the model, so a reference the user kept to a ``build_model`` parameter (a module attribute, a
global, a hook's closure, an optimizer built over it) is neither side's parameter, and an
identity test or a value read through it was EQUIVALENT on wrong FSDP2 plans. Fast,
in-process checks of the refusal; the end-to-end runs are ``tests/adversarial/
test_round44c.py``."""

from __future__ import annotations

import types
import weakref

import pytest
import torch
from torch import nn

from spec_lang.errors import PlanError
from spec_lang.torch_frontend.step_state import UNCOMPARABLE, step_state


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(3, 4, bias=False)
        self.w2 = nn.Linear(4, 3, bias=False)
        self.register_buffer("scale", torch.ones(3))

    def forward(self, x):
        return self.w2(self.w1(x)) * self.scale


def _replaced(model: MLP) -> dict[int, str]:
    """Put fresh parameters and buffers into ``model`` as the capture does; id -> name of
    the replaced ones."""
    old = {}
    for mod, attr, name in ((model.w1, "weight", "w1.weight"), (model.w2, "weight", "w2.weight")):
        p0 = mod._parameters[attr]
        old[id(p0)] = f"parameter {name}"
        mod._parameters[attr] = nn.Parameter(p0.detach().clone())
    b0 = model._buffers["scale"]
    old[id(b0)] = "buffer scale"
    model._buffers["scale"] = b0.clone()
    return old


def _state(model: MLP, opt: torch.optim.Optimizer, old: dict[int, str]) -> dict[str, str]:
    return step_state(model, opt, [], stale=old, site="train.py:1")


def _keep(model: MLP):
    """The references kept before the replacement (they stay alive in the test)."""
    return model.w1.weight, model.w2.weight, model.scale


def test_clean_model_passes():
    """Nothing held: the fingerprint is read, no refusal; the fresh parameters in a module
    attribute are the model's own (named, not stale)."""
    model = MLP()
    keep = _keep(model)
    old = _replaced(model)
    model.mine = [model.w2.weight]      # the traced parameter itself: fine
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    out = _state(model, opt, old)
    assert out["module <model>.mine"] == "builtins.list[<parameter w2.weight>]"
    assert keep


@pytest.mark.parametrize("hold, entry, name", [
    (lambda m, k: setattr(m, "refs", [k[1]]), "module <model>.refs", "parameter w2.weight"),
    (lambda m, k: setattr(m.w1, "ns", types.SimpleNamespace(t=k[0])), "module w1.ns",
     "parameter w1.weight"),
    (lambda m, k: setattr(m, "wr", weakref.ref(k[1])), "module <model>.wr",
     "parameter w2.weight"),
    (lambda m, k: setattr(m, "cache", {"s": (k[2],)}), "module <model>.cache", "buffer scale"),
    (lambda m, k: m.register_forward_hook(lambda mod, a, o, t=k[1]: o), "module <model>.",
     "parameter w2.weight"),
])
def test_reference_refused(hold, entry, name):
    """A reference to a replaced tensor anywhere the fingerprint reads: refused, naming the
    entry (a hook's default argument counts as its state) and the tensor."""
    model = MLP()
    keep = _keep(model)
    old = _replaced(model)
    hold(model, keep)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(PlanError) as e:
        _state(model, opt, old)
    msg = str(e.value)
    assert msg.startswith(f"train.py:1: {entry}") and f"the {name} object" in msg, msg
    assert "R44c-5" in msg


def test_optimizer_over_replaced_parameters_refused():
    """An optimizer built over the replaced objects (it would update what the model no longer
    holds): refused at its parameter group."""
    model = MLP()
    keep = _keep(model)
    old = _replaced(model)
    opt = torch.optim.SGD([keep[0], model.w2.weight], lr=0.1)
    with pytest.raises(PlanError) as e:
        _state(model, opt, old)
    assert "optimizer.param_groups[0]['params'] holds the parameter w1.weight" in str(e.value)


def test_without_stale_nothing_is_refused():
    """The same references with no ``stale`` table (the default): read as other tensors."""
    model = MLP()
    keep = _keep(model)
    _replaced(model)
    model.refs = [keep[1]]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    out = step_state(model, opt, [])
    assert out["module <model>.refs"].startswith(UNCOMPARABLE + "builtins.list[tensor((3, 4),")
