"""The unsharded leaves of a ``fully_shard`` pipeline stage for one ``schedule.step``
(``spec_lang/torch_frontend/pp_leaves.py``; issue 11, R41e-1, R42a-1, R42a-3, R42b-1): their
lifetime and the one reduction, on plain tensors with the functional collectives replaced by a
two-rank simulation in which the other rank holds the same gradients (no process group,
seconds). The end-to-end proves are the slow tests of the plan files."""

from __future__ import annotations

import types

import pytest
import torch
from torch import nn

from spec_lang.errors import PlanError
from spec_lang.torch_frontend import dataparallel, pp_leaves
from spec_lang.torch_frontend import pp_data_parallel as pdp

N = 2     # the simulated shard axis size


@pytest.fixture
def collectives(monkeypatch):
    """``all_gather``: ``N`` copies of the shard; ``reduce_scatter`` (sum): this rank's block
    of ``N`` times the gradient; ``all_reduce`` (sum): ``N`` times it. Logs the calls."""
    import torch.distributed._functional_collectives as funcol

    log: list[str] = []

    def gather(x, dim, group):
        log.append("all_gather")
        return torch.cat([x] * N, dim)

    def scatter(x, op, dim, group):
        log.append("reduce_scatter")
        return N * x.chunk(N, dim)[0]

    def reduce(x, op, group):
        log.append("all_reduce")
        return N * x

    monkeypatch.setattr(funcol, "all_gather_tensor", gather)
    monkeypatch.setattr(funcol, "reduce_scatter_tensor", scatter)
    monkeypatch.setattr(funcol, "all_reduce", reduce)
    monkeypatch.setattr(funcol, "wait_tensor", lambda x: x)
    return log


def _unit(module, kind="fsdp", rat=None, factor=4.0):
    return types.SimpleNamespace(
        kind=kind, module=module, shard_axis="dp", replicate_axes=("rep",),
        mesh=types.SimpleNamespace(mesh_dim_names=("dp",)), group=lambda a: a,
        factor=lambda: factor,
        settings={"_site": "train.py:3"} | ({} if rat is None else {"reshard_after_forward": rat}))


def _refuse(what):
    raise PlanError(what)


def _stage():
    """A stage module with one block (its weight stored as the rank's half of dim 0)."""
    m = nn.Sequential(nn.Linear(3, 4, bias=False))
    stored = nn.Parameter(torch.arange(6.0).reshape(2, 3))       # the rank's shard
    m[0]._parameters["weight"] = stored
    return m, stored


def test_one_leaf_per_parameter_for_the_step_accumulating_local_gradients(collectives):
    m, stored = _stage()
    u = _unit(m[0])
    steps = pp_leaves.StepLeaves(m, _refuse)
    pp_leaves.ACTIVE.append(steps)
    try:
        a = pp_leaves.leaf_for(u, stored, stored)
        b = pp_leaves.leaf_for(u, stored, stored)        # a later forward, the recomputation
    finally:
        pp_leaves.ACTIVE.remove(steps)
    assert a is b and a.is_leaf and a.requires_grad and a.grad_fn is None
    assert a.shape == (4, 3) and collectives == ["all_gather"]    # one gather for the step
    assert torch.equal(a.detach(), torch.cat([stored.detach()] * N))
    for k in (1.0, 2.0):                                  # two micro-batches' backwards
        (k * a).sum().backward()
    assert torch.equal(a.grad, torch.full((4, 3), 3.0))   # the local gradients' sum
    assert stored.grad is None                            # unreduced until the reduction
    assert pp_leaves.leaf_for(u, stored, stored) is None  # no step active: the per-forward view


def test_the_reduction_reduce_scatters_the_sum_once_and_registers_the_stored_back(collectives):
    m, stored = _stage()
    u = _unit(m[0], factor=4.0)
    steps = pp_leaves.StepLeaves(m, _refuse)
    leaf = steps.leaf(u, stored, stored)
    steps.register()
    assert m[0].weight is leaf                            # held from a backward on
    (leaf * 1.0).sum().backward()
    (leaf * 2.0).sum().backward()
    stored.grad = torch.ones(2, 3)                       # an earlier step's gradient
    steps.reduce()
    assert collectives == ["all_gather", "reduce_scatter", "all_reduce"]
    # RS(3) = 2 * 3 on this rank's block, then the replicate all-reduce (x2), / 4: 3, plus 1
    assert torch.equal(stored.grad, torch.full((2, 3), 4.0))
    assert m[0].weight is stored and leaf.grad is None and steps.leaves == {}


def test_a_leaf_with_no_gradient_leaves_the_stored_gradient_alone(collectives):
    m, stored = _stage()
    steps = pp_leaves.StepLeaves(m, _refuse)
    steps.leaf(_unit(m[0]), stored, stored)
    steps.reduce()
    assert stored.grad is None and collectives == ["all_gather"]


def test_a_replicate_units_leaf_is_all_reduced(collectives):
    m, stored = _stage()
    u = _unit(m[0], kind="ddp", factor=2.0)
    steps = pp_leaves.StepLeaves(m, _refuse)
    leaf = steps.leaf(u, stored, stored)
    assert leaf is not stored and leaf.shape == stored.shape and leaf.is_leaf
    leaf.sum().backward()
    steps.reduce()
    assert collectives == ["all_reduce"] and torch.equal(stored.grad, torch.ones(2, 3))


@pytest.mark.parametrize("write", ["stored", "leaf"])
def test_a_parameter_written_in_place_in_the_step_is_refused(collectives, write):
    m, stored = _stage()
    u = _unit(m[0])
    steps = pp_leaves.StepLeaves(m, _refuse)
    leaf = steps.leaf(u, stored, stored)
    with torch.no_grad():
        (stored if write == "stored" else leaf).mul_(2.0)
    with pytest.raises(PlanError,
                       match=r"fully_shard \(fully_shard at train.py:3\) is written in place"):
        steps.leaf(u, stored, stored)
    with pytest.raises(PlanError, match="written in place"):
        steps.reduce()


@pytest.mark.parametrize(("rat", "root", "keeps"), [
    (None, True, True), (None, False, False), (False, False, True), (True, True, False)])
def test_which_units_keep_the_leaves_after_their_forward(collectives, rat, root, keeps):
    """FSDP2's root (the stage module) does not reshard when ``reshard_after_forward`` is left
    None, other units do; ``False`` keeps, ``True`` reshards (S42-1)."""
    m, stored = _stage()
    u = _unit(m if root else m[0], rat=rat)
    steps = pp_leaves.StepLeaves(m, _refuse)
    pp_leaves.ACTIVE.append(steps)
    try:
        assert not pp_leaves.keeps_unsharded(u)          # no leaf made yet
        steps.leaf(u, stored, stored)
        assert pp_leaves.keeps_unsharded(u) is keeps
    finally:
        pp_leaves.ACTIVE.remove(steps)
    assert not pp_leaves.keeps_unsharded(u)


def test_unit_view_gives_the_steps_leaf_to_every_forward(collectives, monkeypatch):
    m, stored = _stage()
    u = _unit(m[0])
    monkeypatch.setattr(dataparallel, "_unit_view", lambda *a: pytest.fail("a new view"))
    steps = pp_leaves.StepLeaves(m, _refuse)
    pp_leaves.ACTIVE.append(steps)
    try:
        assert dataparallel.unit_view(u, stored, stored) is dataparallel.unit_view(
            u, stored, stored)
    finally:
        pp_leaves.ACTIVE.remove(steps)


def test_the_stand_in_stage_runs_the_leaves_from_step_to_reduction(collectives, monkeypatch):
    """``step_for`` activates the leaves, the unit's pre-backward hook registers them when the
    backward reaches the unit's output (R43a-2: not before), ``reduce_grad_for`` reduces them
    before torch's ``scale_grads``."""
    from torch.distributed.pipelining import stage as stage_mod

    m, stored = _stage()
    pdp_stage = types.SimpleNamespace(submod=m, scaled=[])
    pdp_stage.scale_grads = lambda n: pdp_stage.scaled.append((n, stored.grad.clone()))
    monkeypatch.setattr(pdp, "is_stand_in", lambda mod: mod is m)
    u = _unit(m[0])
    seen, before = [], []

    def backward(out, grads, inputs):
        before.append(m[0].weight)
        out.sum().backward()
        seen.append(m[0].weight)

    monkeypatch.setattr(stage_mod, "stage_backward", backward)
    events: list[str] = []
    dp = pdp.StandInStage(events)
    bwd, red = dp.backward_for(lambda *a, **k: None), dp.reduce_grad_for(lambda *a: None)

    def body(sched):
        for k in range(2):                           # 1F1B: F0 B0 F1 B1
            w = dataparallel.unit_view(u, stored, stored)
            out = w * (k + 1)
            m[0]._parameters["weight"] = stored           # the unit's post-forward reshard
            pp_leaves.pre_backward_hooks(u, out)
            events.extend([f"F{k}", f"B{k}"])
            bwd(pdp_stage, "full", {"stage_output": out, "output_grads": None,
                                    "input_values": None})
            assert w.grad is not None                 # micro-batch k's local gradient, seen
        events.append("REDUCE_GRAD/2")
        red(pdp_stage, 2)

    dp.step_for(lambda s, *a, **k: body(s))(types.SimpleNamespace(_stage=pdp_stage))
    dp.at_end("train.py:9")
    assert seen[0] is seen[1] and seen[0] is not stored and m[0].weight is stored
    assert before == [stored, stored]        # registered by the hook, not at the backward
    # RS(1 + 2) = 2 * 3, all-reduce x2, / 4 = 3, before scale_grads(2)
    assert pdp_stage.scaled[0][0] == 2
    assert torch.equal(pdp_stage.scaled[0][1], torch.full((2, 3), 3.0))
    assert pp_leaves.ACTIVE == []


def test_a_write_into_a_parameter_s_memory_is_refused_wherever_it_runs(collectives):
    """R43a-1: a tensor hook (run by the autograd engine, where no torch function mode is
    active) zeroed a stored shard through ``.data`` (no version counter bumps); FSDP2 gathers
    the shard again for later micro-batches, the step's one leaf did not: EQUIVALENT for a
    wrong step. Under the trace's ``FakeTensorMode`` every write into a stage parameter's or a
    leaf's memory is refused: through ``.data``, from a hook in a backward, into the leaf;
    writes into other tensors and into ``.grad`` pass."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        m, stored = _stage()
        steps = pp_leaves.StepLeaves(m, _refuse)
        other = torch.zeros(2, 3)
        with steps.writes_refused():
            other.add_(1.0)                              # not a parameter: passes
            leaf = steps.leaf(_unit(m[0]), stored, stored)
            x = torch.ones(5, 3, requires_grad=True)
            y = x @ leaf.t()
            y.sum().backward()                           # .grad written: passes
            assert leaf.grad.shape == (4, 3)
            with pytest.raises(PlanError, match=r"aten.zero_.* writes into a parameter"):
                stored.data.zero_()                      # no version counter: still seen
            with pytest.raises(PlanError, match="writes into a parameter"):
                leaf.data.mul_(2.0)
            z = x @ leaf.t()
            z.register_hook(lambda g: stored.data.copy_(other) and None)
            with pytest.raises(PlanError, match="writes into a parameter"):
                z.sum().backward()                       # from the engine
        assert "dispatch" not in vars(mode)              # the trace's mode as it was
        stored.data.zero_()                              # outside the step: not refused


def test_a_parameter_given_other_memory_in_the_step_is_refused(collectives):
    """R43a-1, ``.data = t`` (``set_data``: no operator, no version counter): the stored
    parameter or the leaf holding other memory at the leaf's next use or at the reduction is
    refused."""
    m, stored = _stage()
    steps = pp_leaves.StepLeaves(m, _refuse)
    leaf = steps.leaf(_unit(m[0]), stored, stored)
    stored.data = torch.zeros(2, 3)
    with pytest.raises(PlanError, match="written in place inside schedule.step"):
        steps.leaf(_unit(m[0]), stored, stored)
    m2, stored2 = _stage()
    steps2 = pp_leaves.StepLeaves(m2, _refuse)
    leaf2 = steps2.leaf(_unit(m2[0]), stored2, stored2)
    leaf2.data = torch.zeros(4, 3)
    with pytest.raises(PlanError, match="written in place inside schedule.step"):
        steps2.reduce()
    assert leaf is not leaf2


def test_the_leaf_takes_the_stored_parameter_s_requires_grad(collectives):
    """R43b-1 / R43b-2: FSDP2 makes the unsharded parameter with the sharded one's
    ``requires_grad``; a leaf always requiring grad gave a frozen parameter a gradient the
    optimizer applied (a false accept) or a gradient goal the spec lacks (exit 3). R43c-1: a
    change inside the step is refused (FSDP2 copies it only when it gathers again; followed
    at every use it was a false accept for a root unit, not gathered between micro-batches)."""
    m, stored = _stage()
    stored.requires_grad_(False)                       # frozen for the step
    steps = pp_leaves.StepLeaves(m, _refuse)
    leaf = steps.leaf(_unit(m[0]), stored, stored)
    assert leaf.requires_grad is False
    steps.register()
    assert m[0].weight is leaf and leaf.requires_grad is False
    assert steps.leaf(_unit(m[0]), stored, stored) is leaf      # unchanged: the same leaf
    steps.reduce()
    assert stored.grad is None and m[0].weight is stored
    m2, stored2 = _stage()
    steps2 = pp_leaves.StepLeaves(m2, _refuse)
    steps2.leaf(_unit(m2[0]), stored2, stored2)
    stored2.requires_grad_(False)                      # frozen inside the step
    with pytest.raises(PlanError, match="requires_grad of a parameter .* changed inside"):
        steps2.leaf(_unit(m2[0]), stored2, stored2)
    with pytest.raises(PlanError, match="requires_grad of a parameter .* changed inside"):
        steps2.register()


def test_each_unit_s_leaves_are_registered_when_the_backward_reaches_it(collectives):
    """R43a-2: FSDP2 registers a resharded unit's unsharded parameters in its pre-backward
    hook (on the unit's outputs), unit by unit; a hook of a later unit read an earlier unit's
    parameter while the stand-in had registered every leaf at the start of the backward (a
    right file NOT EQUIVALENT)."""
    m = nn.Sequential(nn.Linear(3, 3, bias=False), nn.Linear(3, 3, bias=False))
    s0, s1 = nn.Parameter(torch.ones(1, 3) * 2), nn.Parameter(torch.ones(1, 2) * 3)
    m[0]._parameters["weight"], m[1]._parameters["weight"] = s0, s1
    u0, u1 = _unit(m[0]), _unit(m[1])
    steps = pp_leaves.StepLeaves(m, _refuse)
    pp_leaves.ACTIVE.append(steps)
    try:
        x = torch.ones(4, 3)
        h = x @ steps.leaf(u0, s0, s0).t()
        pp_leaves.pre_backward_hooks(u0, h)
        saw = []
        y = h @ steps.leaf(u1, s1, s1).t()
        y.register_hook(lambda g: saw.append((m[0].weight, m[1].weight)) and None)
        pp_leaves.pre_backward_hooks(u1, y)
        y.sum().backward()
    finally:
        pp_leaves.ACTIVE.remove(steps)
    assert saw == [(s0, s1)]                     # the user's hook ran before either unit's
    assert m[0].weight is steps.leaves[id(s0)].leaf and m[1].weight is steps.leaves[id(s1)].leaf
