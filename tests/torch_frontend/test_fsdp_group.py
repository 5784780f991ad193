"""``fully_shard([a, b])`` as ONE FSDP2 state (``fsdp_hold.Group``: R43f-2, R43g-1), FSDP2's
``iter_forward_root`` (``fsdp_hold.forward_pre`` / ``forward_post``: R44a-1, R44a-2) and the
FSDP-based ``replicate``'s reshard rule (R43d-1). Plain tensors, the functional collectives
replaced by the two-rank simulation of ``test_fsdp_hold.py`` (seconds); the end-to-end proves
are the slow tests of rounds 43f, 43g and 44a (``tests/adversarial``)."""

from __future__ import annotations

import types

import pytest
import torch
from torch import nn

from spec_lang.errors import PlanError
from spec_lang.torch_frontend import dataparallel, fsdp_hold
from tests.torch_frontend.test_fsdp_hold import N, _unit, collectives  # noqa: F401 -- fixture


class Probe(nn.Module):
    """``w2(tanh(w1(x)))`` that records, between the two forwards, whether ``w2`` holds a
    view (FSDP2: the group's first member gathered the whole group)."""

    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(3, 4, bias=False)
        self.w2 = nn.Linear(4, 3, bias=False)
        self.seen: list[bool] = []
        self.stored: dict = {}

    def forward(self, x):
        h = torch.tanh(self.w1(x))
        self.seen.append(self.w2.weight is not self.stored["w2.weight"])
        return self.w2(h)


def _install_group():
    """``fully_shard([m.w1, m.w2])`` then ``fully_shard(m)`` (a root owning no parameter)."""
    m = Probe()
    new = {}
    for name, mod in (("w1.weight", m.w1), ("w2.weight", m.w2)):
        new[name] = nn.Parameter(mod.weight.detach()[: mod.weight.shape[0] // N].clone())
        mod._parameters["weight"] = new[name]
    m.stored = new
    members = (m.w1, m.w2)
    u1 = _unit(m.w1, _group=2, _members=members)
    u2 = _unit(m.w2, _group=2, _members=members)
    ur = _unit(m)
    owner = {"w1.weight": (u1, [(m.w1, "weight")]), "w2.weight": (u2, [(m.w2, "weight")])}
    dataparallel.install_units([u1, u2, ur], owner, new, dict(new))
    return m, new


def _held(m, new):
    return (m.w1.weight is not new["w1.weight"], m.w2.weight is not new["w2.weight"])


def test_the_groups_first_member_gathers_every_member():
    m, new = _install_group()
    out = m(torch.ones(2, 3))
    assert m.seen == [True]                 # w2's view registered before w2's forward (R43f-2)
    assert _held(m, new) == (False, False)  # a non-root group reshards after its last member
    out.sum().backward()
    assert new["w1.weight"].grad.shape == (2, 3) and new["w2.weight"].grad.shape == (1, 4)


def test_a_write_between_the_members_forwards_reaches_the_view_not_the_shard():
    m, new = _install_group()
    before = new["w2.weight"].detach().clone()

    def decay(module, args):
        with torch.no_grad():
            module.w2.weight.mul_(0.5)      # between w1's and w2's forward: the held view
    m.w1.register_forward_hook(lambda mod, a, o: decay(m, a))
    m(torch.ones(2, 3))
    assert torch.equal(new["w2.weight"].detach(), before)   # lost at the reshard, as FSDP2


def test_a_standalone_member_call_claims_the_forward_root():
    """R44a-2: after ``m.w2(z)`` alone the group is open and holds the forward root; the next
    ``m(x)``'s root post-forward completes nothing, w2's forward reopens the group and the
    views stay registered until the backward."""
    m, new = _install_group()
    m(torch.ones(2, 3))
    assert _held(m, new) == (False, False)
    m.w2(torch.ones(2, 4))
    assert _held(m, new) == (True, True)    # the group is open: w1 never ran again
    out = m(2 * torch.ones(2, 3))
    assert _held(m, new) == (True, True)    # not completed by the root (not the forward root)
    out.sum().backward()
    assert _held(m, new) == (False, False)


def test_the_group_completes_at_the_root_that_claimed_the_forward():
    """The root's post-forward completes a group whose member did not run
    (``_force_complete_incomplete_states``)."""
    m, new = _install_group()
    m.forward = types.MethodType(lambda self, x: torch.tanh(self.w1(x)), m)
    m(torch.ones(2, 3))                     # w2 never runs: the root completes the group
    assert _held(m, new) == (False, False)


def test_the_fsdp_based_replicate_never_reshards_after_the_forward():
    u = _unit(nn.Linear(2, 2))
    u.kind = "ddp"                          # replicate_with_fsdp: an FSDP2 state (R43d-1)
    assert fsdp_hold.reshards_after_forward(u, root=False) is False
    assert fsdp_hold.reshards_after_forward(u, root=True) is False
    u.settings["reshard_after_forward"] = True
    with pytest.raises(PlanError, match="FSDP-based replicate"):
        fsdp_hold.reshards_after_forward(u, root=False)
