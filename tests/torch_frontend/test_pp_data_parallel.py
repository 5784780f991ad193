"""A pipeline stage whose module is wrapped by ``fully_shard`` (PP x FSDP2, issue 11):
``spec_lang/torch_frontend/pp_data_parallel.py``'s two hooks, on small stand-in stages (no
trace, no process group: seconds). The end-to-end proves and their gloo truths are the slow
tests of ``examples/torch/llama_pp_fsdp.py`` (``test_examples.py``, ``test_pp_truth.py``)."""

from __future__ import annotations

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
    dp = pdp.StandInStage(["F0", "B0"], _refuse)
    bwd = dp.backward_for(lambda *a, **k: orig.append((a, k)) or ("torch", None))
    kw = {"stage_output": 1, "output_grads": 2, "input_values": 3}
    # no sync flags are set on the stand-in: its user-facing set_requires_gradient_sync(False)
    # would be refused (a user's skipped reduction); the plain branch reduces per backward
    assert bwd(_stage(_stand_in()), "full", kw, last_backward=False) == ("g", None)
    assert calls == [(1, 2, 3)] and orig == [] and dp.backwards == 1
    plain = _stage(nn.Linear(3, 2))
    assert bwd(plain, "full", kw, last_backward=True) == ("torch", None)
    assert orig == [((plain, "full", kw), {"last_backward": True})]
    with pytest.raises(PlanError, match="'input' backward"):
        bwd(_stage(_stand_in()), "input", kw)


def test_a_backward_after_the_reduction_is_refused(monkeypatch):
    from torch.distributed.pipelining import stage as stage_mod

    monkeypatch.setattr(stage_mod, "stage_backward", lambda *a: None)
    events = ["B0", "B1", "REDUCE_GRAD/2"]
    bwd = pdp.StandInStage(events, _refuse).backward_for(lambda *a, **k: None)
    with pytest.raises(PlanError, match="after torch's final gradient reduction"):
        bwd(_stage(_stand_in()), "full", {"stage_output": 0, "output_grads": 0,
                                         "input_values": 0})


def test_the_reduction_of_a_stand_in_stage_only_scales_with_torchs_factor():
    orig = []
    for factor, scaled in ((2, [2]), (1, [])):       # scale_grads=False: torch passes 1
        events = ["B0", "B1", f"REDUCE_GRAD/{factor}"]
        red = pdp.StandInStage(events, _refuse).reduce_grad_for(
            lambda *a: orig.append(a))
        st = _stage(_stand_in())
        red(st, factor)
        assert st.scaled == scaled and orig == []
        assert events[-1] == f"REDUCE_GRAD/{factor}{pdp.STAND_IN_MARK}"
    plain = _stage(nn.Linear(3, 2))
    events = ["B0", "REDUCE_GRAD/2"]
    pdp.StandInStage(events, _refuse).reduce_grad_for(lambda *a: orig.append(a))(plain, 2)
    assert orig == [(plain, 2)] and events[-1] == "REDUCE_GRAD/2"   # torch's own, unmarked


def test_a_second_reduction_is_refused():
    events = ["B0", "REDUCE_GRAD/2", "REDUCE_GRAD/2"]
    red = pdp.StandInStage(events, _refuse).reduce_grad_for(lambda *a: None)
    with pytest.raises(PlanError, match="second gradient reduction"):
        red(_stage(_stand_in()), 2)


def test_a_backward_without_the_reduction_is_refused_when_the_step_returns(monkeypatch):
    from torch.distributed.pipelining import stage as stage_mod

    monkeypatch.setattr(stage_mod, "stage_backward", lambda *a: None)
    events = ["F0", "B0"]
    dp = pdp.StandInStage(events, _refuse)
    dp.at_end("train.py:9")              # no backward of a stand-in yet: nothing to say
    dp.backward_for(lambda *a, **k: None)(_stage(_stand_in()), "full", {
        "stage_output": 0, "output_grads": 0, "input_values": 0})
    with pytest.raises(PlanError, match="train.py:9: .*without torch's final gradient"):
        dp.at_end("train.py:9")
    events.append("REDUCE_GRAD/1")
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
