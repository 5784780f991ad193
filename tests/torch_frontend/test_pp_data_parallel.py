"""A pipeline stage whose module is wrapped by ``fully_shard`` (PP x FSDP2, issue 11):
``spec_lang/torch_frontend/pp_data_parallel.py``'s two hooks, on small stand-in stages (no
trace, no process group: seconds). The end-to-end proves and their gloo truths are the slow
tests of ``examples/torch/llama_pp_fsdp.py`` (``test_examples.py``, ``test_pp_truth.py``)."""

from __future__ import annotations

import importlib
import types

import pytest
import torch
from torch import nn

from spec_lang.errors import PlanError
from spec_lang.torch_frontend import pp_data_parallel as pdp
from spec_lang.torch_frontend.dataparallel import _as_fsdp_module, _fsdp_methods, DPUnit


def _stand_in(base: str = "fsdp") -> nn.Module:
    """A module made an ``FSDPModule`` as the front end's ``fully_shard`` stand-in makes it."""
    m = nn.Linear(3, 2)
    u = DPUnit(base, m, mesh=None)
    for k, f in _fsdp_methods(u).items():
        object.__setattr__(m, k, types.MethodType(f, m))
    if base == "fsdp":
        _as_fsdp_module(m)
    else:
        from torch.distributed._composable.replicate_with_fsdp import ReplicateModule
        _as_fsdp_module(m, ReplicateModule, "Replicate")
    return m


class _Real(nn.Linear):
    """An ``FSDPModule`` the stand-in did not make (as real ``fully_shard`` leaves a module)."""


def _real_fsdp() -> nn.Module:
    from torch.distributed.fsdp import FSDPModule

    m = nn.Linear(3, 2)
    m.__class__ = type("FSDPReal", (FSDPModule, _Real), {})
    return m


def _refuse(what: str) -> None:
    raise PlanError(what)


def _stage(submod: nn.Module) -> types.SimpleNamespace:
    st = types.SimpleNamespace(submod=submod, scaled=[])
    st.scale_grads = lambda n: st.scaled.append(n)
    return st


def _in_step(dp: pdp.StandInStage) -> pdp.StandInStage:
    """``dp`` as inside ``schedule.step`` (its guard made, not entered)."""
    dp.guard = pdp.AutogradStateGuard([], _refuse, None)
    return dp


def test_a_backward_outside_schedule_step_is_refused(monkeypatch):
    """R42a-4: ``schedule._step_microbatches`` called directly ran the stand-in's backwards
    with the guard off (a 1F1B forward then read micro-batch 0's gradient unrefused)."""
    from torch.distributed.pipelining import stage as stage_mod

    monkeypatch.setattr(stage_mod, "stage_backward", lambda *a: None)
    bwd = pdp.StandInStage(["F0", "B0"]).backward_for(lambda *a, **k: None)
    with pytest.raises(PlanError, match="outside schedule.step"):
        bwd(_stage(_stand_in()), "full", {"stage_output": 0, "output_grads": 0,
                                         "input_values": 0})


def test_a_stand_in_is_recognised_and_a_real_fsdp_module_refused():
    assert pdp.is_stand_in(_stand_in()) and pdp.is_stand_in(_stand_in("ddp"))
    assert not pdp.is_stand_in(nn.Linear(3, 2)) and not pdp.is_stand_in(_real_fsdp())
    pdp.check_stage_module(_stand_in(), _refuse)
    pdp.check_stage_module(nn.Linear(3, 2), _refuse)
    with pytest.raises(PlanError, match="FSDPModule not wrapped in parallelize"):
        pdp.check_stage_module(_real_fsdp(), _refuse)


def test_the_backward_of_a_stand_in_stage_is_torchs_plain_backward(monkeypatch):
    from torch.distributed.pipelining import stage as stage_mod

    calls = []
    monkeypatch.setattr(stage_mod, "stage_backward",
                        lambda out, grads, inputs: calls.append((out, grads, inputs)) or "g")
    orig = []
    dp = _in_step(pdp.StandInStage(["F0", "B0"]))
    bwd = dp.backward_for(lambda *a, **k: orig.append((a, k)) or ("torch", None))
    kw = {"stage_output": 1, "output_grads": 2, "input_values": 3}
    # no sync flags are set on the stand-in: its user-facing set_requires_gradient_sync(False)
    # would be refused (a user's skipped reduction); the plain branch reduces per backward
    assert bwd(_stage(_stand_in()), "full", kw, last_backward=False) == ("g", None)
    assert calls == [(1, 2, 3)] and orig == [] and dp.pending
    plain = _stage(nn.Linear(3, 2))
    assert bwd(plain, "full", kw, last_backward=True) == ("torch", None)
    assert orig == [((plain, "full", kw), {"last_backward": True})]
    with pytest.raises(PlanError, match="'input' backward"):
        bwd(_stage(_stand_in()), "input", kw)


def test_a_backward_after_the_reduction_is_refused(monkeypatch):
    from torch.distributed.pipelining import stage as stage_mod

    monkeypatch.setattr(stage_mod, "stage_backward", lambda *a: None)
    events = ["B0", "B1", "REDUCE_GRAD/2"]
    bwd = _in_step(pdp.StandInStage(events)).backward_for(lambda *a, **k: None)
    with pytest.raises(PlanError, match="after torch's final gradient reduction"):
        bwd(_stage(_stand_in()), "full", {"stage_output": 0, "output_grads": 0,
                                         "input_values": 0})


def test_the_reduction_of_a_stand_in_stage_only_scales_with_torchs_factor():
    orig = []
    for factor, scaled in ((2, [2]), (1, [])):       # scale_grads=False: torch passes 1
        events = ["B0", "B1", f"REDUCE_GRAD/{factor}"]
        red = pdp.StandInStage(events).reduce_grad_for(
            lambda *a: orig.append(a))
        st = _stage(_stand_in())
        red(st, factor)
        assert st.scaled == scaled and orig == []
        assert events[-1] == f"REDUCE_GRAD/{factor}{pdp.STAND_IN_MARK}"
    plain = _stage(nn.Linear(3, 2))
    events = ["B0", "REDUCE_GRAD/2"]
    pdp.StandInStage(events).reduce_grad_for(lambda *a: orig.append(a))(plain, 2)
    assert orig == [(plain, 2)] and events[-1] == "REDUCE_GRAD/2"   # torch's own, unmarked


def test_a_second_reduction_is_refused():
    events = ["B0", "REDUCE_GRAD/2", "REDUCE_GRAD/2"]
    refusals: list[str] = []
    red = pdp.StandInStage(events, refusals, lambda: "train.py:7").reduce_grad_for(
        lambda *a: None)
    with pytest.raises(PlanError, match="second gradient reduction"):
        red(_stage(_stand_in()), 2)
    # one sentence with the user's line and step 7's docs, not the schedule list (stop 43)
    assert refusals == ["train.py:7: a second gradient reduction (perform_reduce_grad) of a "
                        "stage wrapped by fully_shard in one schedule.step is not supported "
                        "(docs/torch.md, 'Pipelining', step 7)"]


def test_a_backward_without_the_reduction_is_refused_when_the_step_returns(monkeypatch):
    from torch.distributed.pipelining import stage as stage_mod

    monkeypatch.setattr(stage_mod, "stage_backward", lambda *a: None)
    events = ["F0", "B0"]
    dp = _in_step(pdp.StandInStage(events))
    dp.at_end("train.py:9")              # no backward of a stand-in yet: nothing to say
    dp.backward_for(lambda *a, **k: None)(_stage(_stand_in()), "full", {
        "stage_output": 0, "output_grads": 0, "input_values": 0})
    with pytest.raises(PlanError, match="train.py:9: .*without torch's final gradient"):
        dp.at_end("train.py:9")
    events.append("REDUCE_GRAD/1")
    dp.reduce_grad_for(lambda *a: None)(_stage(_stand_in()), 1)
    dp.at_end("train.py:9")


def test_a_users_own_skipped_reduction_stays_refused():
    m = _stand_in()
    with pytest.raises(PlanError, match=r"set_requires_gradient_sync\(False\)"):
        m.set_requires_gradient_sync(False)


def test_the_verdict_states_the_per_backward_reduction():
    from spec_lang.torch_frontend.pp_frontend import pp_assumptions

    def plan(ev0):
        return types.SimpleNamespace(pp={"n_stages": 2, "axis": "pp", "stages": [
            {"schedule": "ScheduleGPipe", "n_microbatches": 2, "events": ev0},
            {"schedule": "ScheduleGPipe", "n_microbatches": 2, "events": ["B0"]}]})
    marked = pp_assumptions(plan(["B0", "REDUCE_GRAD/2" + pdp.STAND_IN_MARK]))
    assert marked[-1] == pdp.STAND_IN_ASSUMPTION and len(marked) == 3
    assert len(pp_assumptions(plan(["B0", "REDUCE_GRAD/2"]))) == 2


def test_torchs_hooks_are_patched_only_inside_the_pipelining_block():
    from torch.distributed.pipelining import stage as stage_mod

    from spec_lang.torch_frontend.pp_capture import pipelining

    base = stage_mod._PipelineStageBase  # noqa: SLF001
    before = {k: base.__dict__[k] for k in ("backward_maybe_with_nosync",
                                            "perform_reduce_grad")}
    with pipelining("train.py", cpu=True, in_meta=None):
        assert all(base.__dict__[k] is not v for k, v in before.items())
    assert all(base.__dict__[k] is v for k, v in before.items())
    assert torch.distributed.pipelining.stage.stage_backward is stage_mod.stage_backward


def _guarded_step(events: list[str], body, submod: nn.Module | None = None):
    """Run ``body(schedule)`` as torch's ``schedule.step`` of a stand-in stage through
    :meth:`StandInStage.step_for`; returns the StandInStage."""
    dp = pdp.StandInStage(events)
    sched = types.SimpleNamespace(_stage=_stage(submod if submod is not None else _stand_in()))
    dp.step_for(lambda s, *a, **k: body(s))(sched)
    return dp


@pytest.mark.parametrize("read", [
    lambda w: w._version, lambda w: w.data, lambda w: setattr(w, "data", torch.ones(2, 3)),
    lambda w: w.untyped_storage(), lambda w: w.data_ptr(), lambda w: w._typed_storage()])
def test_storage_access_of_a_stand_in_stages_parameters_is_refused_inside_the_step(read):
    """What the leaves (pp_leaves) do not model: a write through ``.data`` or the storage
    bumps no version counter (FSDP2's unsharded parameter shares the all-gather's storage)."""
    m = _stand_in()
    with pytest.raises(PlanError, match="of a parameter of a pipeline stage wrapped by "
                                        "fully_shard, inside schedule.step"):
        _guarded_step(["F0"], lambda s: read(m.weight), m)


@pytest.mark.parametrize("read", [
    lambda w: w.grad, lambda w: w.is_leaf, lambda w: w.grad_fn, lambda w: w._base,
    lambda w: setattr(w, "grad", None), lambda w: w.register_hook(lambda g: g),
    lambda w: w.retain_grad(), lambda w: w._is_view(), lambda w: w.requires_grad_(True),
    lambda w: w.register_post_accumulate_grad_hook(lambda p: None)])
def test_the_autograd_state_of_a_stand_in_stages_parameters_is_free_inside_the_step(read):
    """R41e-1 / R42a-1 / R42b-1: since the stand-in holds FSDP2's unsharded leaves
    (pp_leaves), ``.grad``, ``is_leaf``, ``grad_fn`` and hooks read what the real run holds
    (an in-place write is refused by the leaves' version check, test_pp_leaves)."""
    m = _stand_in()
    _guarded_step(["F0"], lambda s: read(m.weight), m)


def test_shapes_types_and_ops_of_the_parameters_are_free_inside_the_step():
    m, seen = _stand_in(), []

    def body(s):
        w = m.weight
        seen.extend([tuple(w.shape), w.dtype, w.device.type, w.requires_grad, w.ndim,
                     float(((w @ torch.ones(3)).sum() - (w.sum(dim=1)).sum()).detach()),
                     tuple(w.T.shape)])
        other = torch.ones(2, requires_grad=True) * 2
        seen.append(other.is_leaf)                    # an activation: not guarded
    _guarded_step(["F0"], body, m)
    assert seen == [(2, 3), torch.float32, "cpu", True, 2, pytest.approx(0.0, abs=1e-5),
                    (3, 2), False]
    m.weight.grad                                    # outside the step: free  # noqa: B018


def test_the_views_a_stand_in_stages_forwards_get_are_guarded_too():
    from spec_lang.torch_frontend import dataparallel

    m, view = _stand_in(), torch.ones(2, 3) * 2      # stands for a gathered view

    def body(s):
        for sink in dataparallel.VIEW_SINKS:         # what unit_view does with a view it makes
            sink.append(view)
        view._version                                 # noqa: B018
    with pytest.raises(PlanError, match="reading ._version"):
        _guarded_step(["F0"], body, m)
    assert dataparallel.VIEW_SINKS == []
    view._version                                     # after the step: free  # noqa: B018


def test_the_front_ends_own_reads_and_torchs_scale_grads_pass():
    m = _stand_in()
    own = {"__name__": "spec_lang.torch_frontend.recompute"}
    exec("def versions(p):\n    return p._version\n", own)  # noqa: S102

    def body(s):
        own["versions"](m.weight)                    # recompute.param_versions' read
        dp.reduce_grad_for(lambda *a: None)(s._stage, 2)
        m.weight.grad                                 # after the reduction  # noqa: B018
    events = ["F0", "B0"]
    dp = pdp.StandInStage(events)
    sched = types.SimpleNamespace(_stage=_stage(m))
    dp.step_for(lambda s, *a, **k: (events.append("REDUCE_GRAD/2"), body(s)))(sched)
    assert sched._stage.scaled == [2]


def test_a_plain_stage_runs_its_step_unguarded():
    m = nn.Linear(3, 2)
    _guarded_step(["F0"], lambda s: m.weight.grad, m)


def test_gradient_accumulation_over_two_schedule_steps_is_followed_step_by_step(monkeypatch):
    """R41e-2: two ``schedule.step`` calls of one schedule, each with its backwards and one
    reduction (right for real: the second reduction reduces the second step's sum)."""
    from torch.distributed.pipelining import stage as stage_mod

    monkeypatch.setattr(stage_mod, "stage_backward", lambda *a: None)
    events: list[str] = []
    dp = pdp.StandInStage(events)
    bwd = dp.backward_for(lambda *a, **k: None)
    red = dp.reduce_grad_for(lambda *a: None)
    st = _stage(_stand_in())
    kw = {"stage_output": 0, "output_grads": 0, "input_values": 0}

    def one_step(s):
        events.extend(["F0", "B0"])
        bwd(st, "full", kw)
        events.append("REDUCE_GRAD/2")
        red(st, 2)
    for _ in range(2):
        dp.step_for(lambda s, *a, **k: one_step(s))(types.SimpleNamespace(_stage=st))
    dp.at_end("train.py:9")
    assert st.scaled == [2, 2]       # torch's scale_grads divides the stored grads each step
    events.append("B1")              # a backward after the steps (outside one): refused
    with pytest.raises(PlanError, match="outside schedule.step"):
        bwd(st, "full", kw)


def test_only_torchs_the_front_ends_and_the_standard_librarys_files_are_trusted():
    import json
    import os
    import site
    import sysconfig

    assert pdp._trusted(torch.__file__) and pdp._trusted(pdp.__file__)
    assert pdp._trusted(json.__file__) and pdp._trusted(os.__file__)
    assert not pdp._trusted(__file__) and not pdp._trusted("<string>")
    for d in {sysconfig.get_paths()["purelib"], *site.getsitepackages()}:
        assert not pdp._trusted(os.path.join(d, "torchtitan", "train.py"))


def test_the_autograd_graph_of_a_derived_tensor_is_free_inside_the_step():
    """R42a-1 (``self.weight.view(-1).grad_fn.next_functions[0][0].variable.grad``) was refused
    while the stand-in's parameters were not FSDP2's; the leaves (pp_leaves) make the node's
    variable the real run's unsharded leaf."""
    m = _stand_in()
    _guarded_step(["F0"], lambda s: m.weight.view(-1).grad_fn, m)


@pytest.mark.parametrize("escape", [
    lambda: torch._C.DisableTorchFunction(), lambda: torch._C._pop_torch_function_stack(),
    lambda: torch.overrides._get_current_function_mode_stack(),
    lambda: torch.overrides._pop_mode_temporarily().__enter__()])
def test_switching_the_modes_off_is_refused_inside_the_step(escape):
    """R42a-2: ``with torch._C.DisableTorchFunction(): self.weight.grad`` skipped the guard
    (still refused: the guard's remaining storage checks would be switched off)."""
    import torch.overrides as overrides

    before = {(modname, n): getattr(importlib.import_module(modname), n)
              for modname, names in pdp.MODE_ESCAPES for n in names
              if hasattr(importlib.import_module(modname), n)}
    with pytest.raises(PlanError, match="inside schedule.step of a pipeline stage wrapped"):
        _guarded_step(["F0"], lambda s: escape())
    assert overrides._get_current_function_mode_stack() == []   # the guard left the stack
    assert all(getattr(importlib.import_module(modname), n) is f
               for (modname, n), f in before.items())           # and torch's names restored
    with torch._C.DisableTorchFunction():                        # outside a step: free
        pass


def test_a_failing_stage_backward_is_refused_naming_its_cause(monkeypatch):
    """R42a-3 (r42a_08): with one leaf per parameter for the step (``pp_leaves``) a graph
    reused across micro-batches through the leaf's identity fails in B1, as for real; torch's
    ``stage_backward`` wraps the cause in a message of debug info only."""
    from torch.distributed.pipelining import stage as stage_mod

    def failing(*a):
        try:
            raise RuntimeError("Trying to backward through the graph a second time (...)")
        except RuntimeError as e:
            raise RuntimeError("\n        Failed to run stage backward:\n") from e

    monkeypatch.setattr(stage_mod, "stage_backward", failing)
    bwd = _in_step(pdp.StandInStage(["F0", "B0"])).backward_for(lambda *a, **k: None)
    with pytest.raises(PlanError, match="failed with the step's unsharded leaves .*: "
                                        "RuntimeError: Trying to backward through the graph"):
        bwd(_stage(_stand_in()), "full", {"stage_output": 0, "output_grads": 0,
                                         "input_values": 0})
