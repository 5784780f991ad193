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


@pytest.mark.state_modules()
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
@pytest.mark.state_modules()
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


@pytest.mark.state_modules()
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


@pytest.mark.state_modules()
def test_without_stale_nothing_is_refused():
    """The same references with no ``stale`` table (the default): read as other tensors."""
    model = MLP()
    keep = _keep(model)
    _replaced(model)
    model.refs = [keep[1]]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    out = step_state(model, opt, [])
    # a held tensor's text (type, shape, flags, bytes' digest: round 53c) is over 80
    # characters, so the entry is the digest of it, marked uncomparable, not refused
    assert out["module <model>.refs"].startswith(UNCOMPARABLE + "<list #"), out


# -- stale_refs.refuse_held: holders outside what the fingerprint reads (round 45a, 45b) ------

def _old_params():
    """[(name, tensor)] of a model's parameters, held only by this list (no local of the
    caller holds one: :func:`refuse_held` counts references)."""
    return [(n, p) for n, p in MLP().named_parameters()]


def test_refuse_held_passes_when_only_ours_hold_them():
    from spec_lang.torch_frontend.stale_refs import refuse_held

    replaced = _old_params()
    refuse_held(replaced, [], "train.py:1")     # only the list (its tuples) holds them


def test_refuse_held_names_another_modules_global():
    """R45a-3: a reference in another module's globals (``math.REFS``)."""
    import math

    from spec_lang.torch_frontend.stale_refs import refuse_held

    replaced = _old_params()
    math.REFS_TEST = [replaced[1][1]]
    try:
        with pytest.raises(PlanError, match="w2.weight object .* the globals of the module math"):
            refuse_held(replaced, [], "train.py:1")
    finally:
        del math.REFS_TEST


def test_refuse_held_without_its_collection_still_names_a_global_and_passes_garbage():
    """``collect=False`` (the capture's call, right after step_state's collection, stop 58):
    a global holder is still named, and a garbage cycle holding a tensor is no holder."""
    import gc
    import math

    from spec_lang.torch_frontend.stale_refs import refuse_held

    replaced = _old_params()
    enabled = gc.isenabled()
    gc.disable()
    try:
        cycle = [replaced[0][1]]
        cycle.append(cycle)
        del cycle                   # garbage now, not collected
        refuse_held(replaced, [], "train.py:1", collect=False)
        gc.collect()                # (the call's own frame, its locals read: a cycle)
        math.REFS_TEST = [replaced[1][1]]
        with pytest.raises(PlanError, match="w2.weight object .* the globals of the module math"):
            refuse_held(replaced, [], "train.py:1", collect=False)
    finally:
        math.__dict__.pop("REFS_TEST", None)
        if enabled:
            gc.enable()


@pytest.mark.parametrize("hide", ["numpy", "frozen"])
def test_refuse_held_finds_holders_the_collector_does_not_see(hide):
    """R45b-1: a numpy object array (not traversed by the collector) and a frozen generation
    (``gc.freeze``): more references than visible referrers."""
    import gc

    import numpy as np

    from spec_lang.torch_frontend.stale_refs import refuse_held

    replaced = _old_params()
    box = []
    if hide == "numpy":
        arr = np.empty(1, dtype=object)
        arr[0] = replaced[0][1]
        box.append(arr)
    else:
        box.append([replaced[0][1]])
        gc.freeze()
    try:
        with pytest.raises(PlanError, match="a holder Python's collector does not see"):
            refuse_held(replaced, [], "train.py:1")
    finally:
        gc.unfreeze()
        box.clear()


def test_refuse_held_a_local_of_a_running_frame_counts_as_hidden():
    """The caller must not keep a replaced tensor in a local (the capture clears its loop
    variables): a local is a reference no referrer shows."""
    from spec_lang.torch_frontend.stale_refs import refuse_held

    replaced = _old_params()
    last = replaced[-1][1]
    with pytest.raises(PlanError, match="does not see"):
        refuse_held(replaced, [], "train.py:1")
    assert last is replaced[-1][1]


def test_refuse_held_a_cycle_does_not_hide_a_hidden_root():
    """R45c-1: a self-referencing list (it is its own visible referrer) kept in a numpy object
    array: the list's reference count shows the hidden holder."""
    import numpy as np

    from spec_lang.torch_frontend.stale_refs import refuse_held

    replaced = _old_params()
    cyc = [replaced[1][1]]
    cyc.append(cyc)
    arr = np.empty(1, dtype=object)
    arr[0] = cyc
    box = [arr]
    del cyc, arr
    try:
        with pytest.raises(PlanError, match="a holder Python's collector does not see"):
            refuse_held(replaced, [], "train.py:1")
    finally:
        box[0][0].clear()
        box.clear()
