"""Which parameter object a ``fully_shard`` unit's modules register after its forward and after
its backward (``spec_lang/torch_frontend/fsdp_hold.py``; S42-1): FSDP2 keeps the unsharded
parameters of a unit that does not reshard after the forward (the root by default,
``reshard_after_forward=False``) registered until its backward. Plain tensors, the functional
collectives replaced by a two-rank simulation (no process group, seconds); the end-to-end
prove is the slow test of r42_01 (``tests/adversarial/test_round42.py``)."""

from __future__ import annotations

import types

import pytest
import torch
from torch import nn

from spec_lang.errors import PlanError
from spec_lang.torch_frontend import dataparallel, fsdp_hold

N = 2     # the simulated shard axis size


@pytest.fixture(autouse=True)
def collectives(monkeypatch):
    """Two ranks holding the same shard and gradients; a gathered view is the plain
    :class:`dataparallel.GatherShard` of the stored tensor (shard dim 0)."""
    import torch.distributed._functional_collectives as funcol

    monkeypatch.setattr(funcol, "all_gather_tensor", lambda x, d, g: torch.cat([x] * N, d))
    monkeypatch.setattr(funcol, "reduce_scatter_tensor",
                        lambda x, op, d, g: N * x.chunk(N, d)[0])
    monkeypatch.setattr(funcol, "all_reduce", lambda x, op, g: N * x)
    monkeypatch.setattr(funcol, "wait_tensor", lambda x: x)
    monkeypatch.setattr(dataparallel, "_unit_view", lambda u, stored, orig: (
        dataparallel.GatherShard.apply(stored, 0, "dp", (), float(N), "",
                                       (stored, fsdp_hold.HOLDS.get(id(u))))))
    yield
    fsdp_hold.release_all()


def _unit(module, **settings):
    return types.SimpleNamespace(
        kind="fsdp", fsdp_state=True, module=module, shard_axis="dp", replicate_axes=(),
        mesh=types.SimpleNamespace(mesh_dim_names=("dp",), ndim=1, size=lambda i=0: N),
        group=lambda a: a, factor=lambda: float(N), settings={"_site": "train.py:3"} | settings)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(3, 4, bias=False)
        self.w2 = nn.Linear(4, 3, bias=False)

    def forward(self, x):
        return self.w2(torch.tanh(self.w1(x)))


def _install(root=None, inner=None, rab=None):
    """The MLP with ``fully_shard(model.w2, reshard_after_forward=inner)`` and
    ``fully_shard(model, reshard_after_forward=root)``: (model, units, stored params)."""
    m = MLP()
    new = {}
    for name, mod in (("w1.weight", m.w1), ("w2.weight", m.w2)):
        new[name] = nn.Parameter(mod.weight.detach()[: mod.weight.shape[0] // N].clone())
        mod._parameters["weight"] = new[name]
    kw = lambda v: {} if v is None else {"reshard_after_forward": v}  # noqa: E731
    u2, ur = _unit(m.w2, **kw(inner)), _unit(m, **kw(root))
    for u in (u2, ur):
        if rab is not None:
            u.settings["reshard_after_backward"] = rab
    owner = {"w1.weight": (ur, [(m.w1, "weight")]), "w2.weight": (u2, [(m.w2, "weight")])}
    hooks = dataparallel.install_units([u2, ur], owner, new, dict(new))
    return m, (u2, ur), new, hooks


def _held(m, new):
    """Per parameter: True when the module registers a view, not the stored parameter."""
    return (m.w1.weight is not new["w1.weight"], m.w2.weight is not new["w2.weight"])


@pytest.mark.parametrize(("root", "inner", "after_forward"), [
    (None, None, (True, False)),        # FSDP2's default: the root keeps, the others reshard
    (None, False, (True, True)),
    (True, None, (False, False)),
    (True, True, (False, False)),
    (False, True, (True, False)),
    (1, 2, (True, False)),              # an int: 1 keeps, the shard axis's size reshards
])
def test_registered_after_forward_and_after_backward(root, inner, after_forward):
    m, _, new, _ = _install(root, inner)
    out = m(torch.ones(2, 3))
    assert _held(m, new) == after_forward
    if after_forward[0]:
        assert m.w1.weight.shape == (4, 3) and m.w1.weight.grad_fn is not None
    out.sum().backward()
    assert _held(m, new) == (False, False)
    assert new["w1.weight"].grad.shape == (2, 3) and new["w2.weight"].grad.shape == (1, 4)


def test_the_gradients_are_those_of_the_plain_model():
    m, _, new, _ = _install()
    x = torch.randn(2, 3)
    full1 = torch.cat([new["w1.weight"].detach()] * N).requires_grad_()
    full2 = torch.cat([new["w2.weight"].detach()] * N).requires_grad_()
    (torch.tanh(x @ full1.T) @ full2.T).sum().backward()
    m(x).sum().backward()
    assert torch.allclose(new["w1.weight"].grad, full1.grad.chunk(N)[0])
    assert torch.allclose(new["w2.weight"].grad, full2.grad.chunk(N)[0])


def test_forwards_within_a_hold_share_one_view():
    m, _, new, _ = _install()
    a = m(torch.ones(2, 3))
    v = m.w1.weight
    b = m(torch.ones(2, 3))
    assert m.w1.weight is v                 # FSDP2: one unsharded parameter, no reshard
    (a + b).sum().backward()
    assert not any(_held(m, new))
    assert new["w1.weight"].grad.abs().sum() > 0


def test_a_forward_without_autograd_holds_and_a_later_one_reuses_it():
    """FSDP2 does not gather a held unit again: a later forward gets the same unsharded
    parameter (a real leaf requiring grad in the capture, ``fsdp_unsharded``; round 48d,
    R48d-1: a frozen held leaf was gathered again and unfrozen)."""
    m, _, new, _ = _install()
    with torch.no_grad():
        m(torch.ones(2, 3))
    v = m.w1.weight
    assert v is not new["w1.weight"]
    m(torch.ones(2, 3))
    assert m.w1.weight is v


def test_no_backward_the_step_end_registers_the_stored():
    m, _, new, _ = _install()
    m(torch.ones(2, 3))
    assert _held(m, new) == (True, False)
    fsdp_hold.release_all()
    assert _held(m, new) == (False, False) and not fsdp_hold.HOLDS


def test_reshard_after_backward_false_keeps_the_views_until_the_step_ends():
    m, _, new, _ = _install(rab=False)
    m(torch.ones(2, 3)).sum().backward()
    assert _held(m, new) == (True, True)    # FSDP2: post_backward does not reshard
    fsdp_hold.release_all()
    assert _held(m, new) == (False, False)


def test_reshard_and_unshard_methods():
    from spec_lang.torch_frontend.pp_capture import train_step_running

    m, (u2, ur), new, _ = _install()
    methods = dataparallel._fsdp_methods(ur)
    with pytest.raises(PlanError, match=r"unshard\(\) outside train_step"):   # R44b-2
        methods["unshard"](m)
    with train_step_running():
        m(torch.ones(2, 3))
        methods["reshard"](m)
        assert _held(m, new) == (False, False)
        methods["unshard"](m)
        v = m.w1.weight
        assert _held(m, new) == (True, False)
        m(torch.ones(2, 3)).sum().backward()    # the forward uses the unshard's view
    assert not any(_held(m, new)) and v.grad_fn is not None


def test_set_reshard_after_forward_is_recorded_recursively():
    m, (u2, ur), new, _ = _install()
    for u in (u2, ur):
        for k, f in dataparallel._fsdp_methods(u).items():
            object.__setattr__(u.module, k, types.MethodType(f, u.module))
    m.set_reshard_after_forward(False)
    assert ur.settings["reshard_after_forward"] is False
    assert u2.settings["reshard_after_forward"] is False
    m(torch.ones(2, 3))
    assert _held(m, new) == (True, True)
    m.set_reshard_after_backward(False, recurse=False)
    assert ur.settings["reshard_after_backward"] is False
    assert "reshard_after_backward" not in u2.settings
    with pytest.raises(PlanError, match="not modelled"):
        m.set_reshard_after_forward(2)


@pytest.mark.parametrize("bad", [3, 0, "yes"])
def test_an_unmodelled_reshard_after_forward_is_refused_at_install(bad):
    with pytest.raises(PlanError, match=r"train.py:3: fully_shard\(\.\.\., reshard_after"):
        _install(root=bad)


def test_the_root_is_the_first_unit_whose_forward_runs():
    """FSDP2's ``_lazy_init``: the first unit whose forward runs is a root and every unit in
    its module tree is not; a unit outside it running later is a root too. R43d-3: the
    outermost module was taken as the root, and ``model.w2(...)`` called directly (a root for
    real, keeping its views after the forward) resharded in the capture."""
    m, (u2, ur), new, hooks = _install()
    try:
        x = torch.ones(2, 3)
        m(x)                                            # the model's forward first
        assert (fsdp_hold.HOLDS[id(ur)].root, fsdp_hold.HOLDS[id(u2)].root) == (True, False)
    finally:
        fsdp_hold.release_all()
        for h in hooks:
            h.remove()
    m, (u2, ur), new, hooks = _install()
    try:
        y = m.w2(torch.ones(2, 4))                      # w2 alone first: a root
        assert fsdp_hold.HOLDS[id(u2)].root is True
        assert m.w2.weight is not new["w2.weight"]      # a root keeps its views
        holds = list(fsdp_hold.HOLDS.values())
        # R43e-2: the model's first forward after a unit inside it: FSDP2's lazy init raises
        with pytest.raises(PlanError, match="already been lazily initialized"):
            m(torch.ones(2, 3))
        del y
    finally:
        fsdp_hold.release_all()
        for h in hooks:
            h.remove()
    # as before the step when it ends (the hooks' closures are step state)
    assert [(h.root, h.vers, h.views) for h in holds] == [(None, {}, {})] * 2


def test_a_held_view_written_through_data_is_stale():
    """R43e-1: an update through ``p.data`` (a hand-written SGD) bumps no version counter;
    the writes counted by storage (``storage_writes``) make the held view stale all the same."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from spec_lang.torch_frontend.storage_writes import counted

    with FakeTensorMode():
        m, (u2, ur), new, hooks = _install()
        try:
            with counted():
                with torch.no_grad():
                    m(torch.ones(2, 3))                  # held by the root
                new["w1.weight"].data.add_(1.0)          # no version counter moves
                with pytest.raises(PlanError, match=r"FSDP2 keeps .* \(w1.weight\)"):
                    m(torch.ones(2, 3))
        finally:
            fsdp_hold.HOLDS.clear()
            for h in hooks:
                h.remove()


def test_a_held_view_of_an_updated_parameter_is_refused():
    """R43d-2 / R43d-4: FSDP2's root keeps the unsharded parameters of a forward no backward
    follows (a ``no_grad`` loss log) and does not gather again: after the optimizer's update
    the next forward (this step's, or the next step's) runs on the old values. Refused at the
    next forward that would reuse them, and when the step ends with them held."""
    m, (u2, ur), new, hooks = _install()
    try:
        with torch.no_grad():
            m(torch.ones(2, 3))                          # held by the root
        assert _held(m, new) == (True, False)
        with torch.no_grad():
            new["w1.weight"].add_(1.0)                   # the optimizer's update
        with pytest.raises(PlanError, match=r"train.py:3: FSDP2 keeps .* \(w1.weight\)"):
            m(torch.ones(2, 3))
    finally:
        fsdp_hold.HOLDS.clear()
        for h in hooks:
            h.remove()
    m, (u2, ur), new, hooks = _install()
    try:
        with torch.no_grad():
            m(torch.ones(2, 3))
            new["w1.weight"].add_(1.0)
    finally:
        with pytest.raises(PlanError, match="registered after the step .*w1.weight"):
            fsdp_hold.release_all()
        for h in hooks:
            h.remove()
    assert m.w1.weight is new["w1.weight"]               # released all the same
    m, (u2, ur), new, hooks = _install()
    try:
        with torch.no_grad():
            new["w1.weight"].add_(1.0)                   # before the gather: not stale
            m(torch.ones(2, 3))
    finally:
        fsdp_hold.release_all()
        for h in hooks:
            h.remove()




def test_a_unit_owning_no_parameter_takes_part_in_the_root_decision():
    """R43e-2 with ``fully_shard(model.w1)``, ``fully_shard(model.w2)``, ``fully_shard(model)``:
    the model's unit owns no parameter and had no Hold, so its forward after a probe of
    ``model.w1`` (a root for FSDP2, which then raises at the model's lazy init) was accepted."""
    m = MLP()
    new = {}
    for name, mod in (("w1.weight", m.w1), ("w2.weight", m.w2)):
        new[name] = nn.Parameter(mod.weight.detach()[: mod.weight.shape[0] // N].clone())
        mod._parameters["weight"] = new[name]
    u1, u2, ur = _unit(m.w1), _unit(m.w2), _unit(m)
    owner = {"w1.weight": (u1, [(m.w1, "weight")]), "w2.weight": (u2, [(m.w2, "weight")])}
    hooks = dataparallel.install_units([u1, u2, ur], owner, new, dict(new))
    try:
        assert id(ur) in fsdp_hold.HOLDS
        with torch.no_grad():
            m.w1(torch.ones(2, 3))                      # the probe: w1 a root
        with pytest.raises(PlanError, match="already been lazily initialized"):
            m(torch.ones(2, 3))
    finally:
        fsdp_hold.release_all()
        for h in hooks:
            h.remove()


def test_a_fully_shard_group_that_becomes_the_root_is_refused():
    """R43f-1 / R43d-6: ``fully_shard([model.w1, model.w2])`` with no ``fully_shard(model)``:
    the group's state runs first and is FSDP2's root, whose lazy init raises on every rank
    ("FSDP requires a single root module"); the stand-in made two roots and ran it. Under a
    root (torchtitan's ``[norm, output]``) a group is no root and runs."""
    m, (u2, ur), new, hooks = _install()
    try:
        for u in (u2, ur):
            u.settings["_group"] = 2
        with pytest.raises(PlanError, match="group of modules .* single root module"):
            m(torch.ones(2, 3))
    finally:
        fsdp_hold.release_all()
        for h in hooks:
            h.remove()
    m, (u2, ur), new, hooks = _install()
    try:
        u2.settings["_group"] = 2                        # a group under the root: runs
        m(torch.ones(2, 3))
    finally:
        fsdp_hold.release_all()
        for h in hooks:
            h.remove()


def test_a_step_stopped_inside_its_backward_leaves_nothing_to_the_next():
    """A refusal raised inside a backward (after the final callback was queued, which then
    never runs) left ``_QUEUED`` set, so the next step in the same process queued no final
    callback and its root kept its views (an order-dependent test failure in stop 46:
    test_selective_ac's refusal before this file). ``install_units`` starts a new step."""
    from spec_lang.torch_frontend import fsdp_hold

    fsdp_hold._QUEUED[0] = True         # as a step stopped inside its backward leaves it
    fsdp_hold.LOST.append("stale")
    m, _, new, _ = _install()
    assert fsdp_hold._QUEUED == [False] and fsdp_hold.LOST == []
    m(torch.ones(2, 3)).sum().backward()
    assert _held(m, new) == (False, False)
