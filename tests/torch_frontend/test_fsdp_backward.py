"""FSDP2's registration inside the backward (``fsdp_backward``: pre-backward on the unit's
outputs, post-backward on its inputs; round 44b, R44b-1) and the parameter attributes carried
into the traced step (``param_attrs``; R44b-3, R44b-4). Plain tensors and the two-rank
simulation of ``test_fsdp_hold.py`` (seconds); the end-to-end proves are the slow tests of
round 44b (``tests/adversarial/test_round44b.py``)."""

from __future__ import annotations

import types

import pytest
import torch
from torch import nn

from spec_lang.errors import PlanError
from spec_lang.torch_frontend import param_attrs
from tests.torch_frontend.test_fsdp_hold import _held, _install, collectives  # noqa: F401


def _late_hook_sees(m, new, x):
    """Backward of ``m(x)`` plus a tensor made before it whose hook runs last (the lowest
    sequence number): what that hook sees registered."""
    seen = []
    early = torch.ones(1, requires_grad=True) * 1.0
    early.register_hook(lambda g: seen.append(_held(m, new)))
    (m(x).sum() + early.sum()).backward()
    return seen


def test_a_root_whose_input_needs_no_grad_stays_unsharded_until_the_final_callback():
    """R44b-1: ``model(x)``, x without grad: no post-backward; the root's views stay
    registered through the backward (a late hook sees them), released at its end."""
    m, _, new, _ = _install()
    assert _late_hook_sees(m, new, torch.ones(2, 3)) == [(True, False)]
    assert _held(m, new) == (False, False)


def test_an_input_that_needs_grad_reshards_at_the_post_backward():
    m, _, new, _ = _install()
    assert _late_hook_sees(m, new, torch.ones(2, 3, requires_grad=True)) == [(False, False)]


def test_a_unit_resharded_after_its_forward_is_registered_again_in_its_backward():
    """The non-root ``w2`` reshards after the forward; its pre-backward (a hook on its
    output) registers the forward's view again until its post-backward."""
    m, _, new, _ = _install()
    inside = []
    # the gradient of w2's input (as w2's forward receives it: after FSDP2's post-backward
    # function) is ready after w2's backward and before its post-backward
    m.w2.register_forward_pre_hook(lambda mod, args: args[0].register_hook(
        lambda g: inside.append(_held(m, new)[1])) and None)
    out = m(torch.ones(2, 3))
    assert _held(m, new) == (True, False)
    out.sum().backward()
    assert inside == [True] and _held(m, new) == (False, False)


def _unit(at_wrap):
    """A ``fully_shard`` unit whose call saw ``at_wrap`` (id -> attributes)."""
    return types.SimpleNamespace(fsdp_state=True, settings={"_site": "t.py:4",
                                                            "_attrs_at_wrap": at_wrap})


def test_attributes_are_carried_and_a_dtensors_own_fields_are_not():
    p0, fresh = nn.Parameter(torch.ones(2)), nn.Parameter(torch.zeros(2))
    p0.no_decay = True
    fresh.own = 1
    p0.own = 2
    assert param_attrs.carried("w", p0, fresh, None, "t.py:1") == {"no_decay": True}


def test_fully_shard_drops_marks_set_before_it_and_keeps_later_ones():
    p0, fresh = nn.Parameter(torch.ones(2)), nn.Parameter(torch.zeros(2))
    p0.late = 3                                     # set after the call
    assert param_attrs.carried("w", p0, fresh, _unit({id(p0): {}}), "x") == {"late": 3}
    u = _unit({id(p0): {"early": 1}})
    p0.early = 1                                    # present at the call and after it
    with pytest.raises(PlanError, match="t.py:4: the parameter 'w' carries the attribute "
                                        "'early'"):
        param_attrs.carried("w", p0, fresh, u, "t.py:4")


def test_the_stand_ins_hooks_take_the_places_fsdp2_registers_its_own_at():
    """R44c-3 / R44d-1 / R44d-2: hooks registered before the call run after FSDP2's pre-hook
    and before its post-hook; later ones after both, unless registered with ``prepend``."""
    from spec_lang.torch_frontend.fsdp_backward import hook_slots, into_slots

    m, order = nn.Linear(2, 2), []
    mark = lambda tag: (lambda *a: order.append(tag) and None)  # noqa: E731
    m.register_forward_pre_hook(mark("user pre, before"))
    m.register_forward_hook(mark("user post, before"))
    slots = hook_slots(m)                                   # the fully_shard call
    m.register_forward_pre_hook(mark("user pre, prepend"), prepend=True)
    m.register_forward_hook(mark("user post, prepend"), prepend=True)
    m.register_forward_hook(mark("user post, after"))
    pre = m.register_forward_pre_hook(mark("FSDP2 pre"))    # the step's install
    post = m.register_forward_hook(mark("FSDP2 post"))
    into_slots(m, pre.id, post.id, slots)
    m(torch.ones(1, 2))
    assert order == ["user pre, prepend", "FSDP2 pre", "user pre, before",
                     "user post, prepend", "user post, before", "FSDP2 post",
                     "user post, after"]


@pytest.mark.parametrize("value", [torch.ones(1), types.SimpleNamespace(x=1), [torch.ones(1)],
                                   object()])
def test_a_mark_that_is_not_plain_is_refused(value):
    p0, fresh = nn.Parameter(torch.ones(2)), nn.Parameter(torch.zeros(2))
    p0.meta = value
    with pytest.raises(PlanError, match="R44d-4"):
        param_attrs.carried("w", p0, fresh, None, "t.py:1")
