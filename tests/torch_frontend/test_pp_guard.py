"""Torch's pipelining as the train file leaves it (``pp_guard.py``; adversarial round 29): a
piece of torch's pipelining or ``torch.distributed`` replaced, its code swapped, a method added
to a schedule class or shadowed on an instance is named (R29-2: ``schedules._wait_batch_p2p`` a
no-op for the step); every live stage and schedule is found, copies made without a constructor
included (R29-3: ``copy.copy`` kept across steps)."""

from __future__ import annotations

import copy
import pickle
import weakref

import pytest
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe, schedules

from spec_lang.errors import PlanError
from spec_lang.torch_frontend import pp_capture
from spec_lang.torch_frontend.pp_capture import outliving_pipeline_objects, pipelining
from spec_lang.torch_frontend.pp_guard import (Snapshot, live_pipeline_objects, modified,
                                               shadowed)

HERE = __file__


def test_an_untouched_torch_differs_in_nothing():
    assert modified(Snapshot(), {}) == []


def test_a_replaced_wait_is_named_and_its_restoration_is_not():
    snap = Snapshot()
    wait = schedules._wait_batch_p2p
    schedules._wait_batch_p2p = lambda works: None
    try:
        assert modified(snap, {}) == ["torch.distributed.pipelining.schedules._wait_batch_p2p"]
    finally:
        schedules._wait_batch_p2p = wait
    assert modified(snap, {}) == []


def test_a_module_attribute_rebound_is_named():
    """R30-3: ``schedules.dist`` (the module torch's schedule calls ``batch_isend_irecv``
    through) replaced by a look-alike for the step."""
    import types

    snap = Snapshot()
    fake = types.ModuleType("torch.distributed")
    fake.__dict__.update(vars(dist))
    real = schedules.dist
    schedules.dist = fake
    try:
        assert modified(snap, {}) == ["torch.distributed.pipelining.schedules.dist"]
    finally:
        schedules.dist = real
    assert modified(snap, {}) == []


def test_a_frozen_collector_is_refused_by_the_scan():
    """R30-2: ``gc.freeze()`` hides objects from ``gc.get_objects()``."""
    import gc

    gc.freeze()
    try:
        with pytest.raises(PlanError, match=r"gc\.freeze"):
            live_pipeline_objects()
    finally:
        gc.unfreeze()
    assert isinstance(live_pipeline_objects(), list)


def test_a_swapped_code_object_is_named():
    snap = Snapshot()
    wait = schedules._wait_batch_p2p
    code = wait.__code__
    wait.__code__ = (lambda works: None).__code__
    try:
        assert modified(snap, {}) == ["torch.distributed.pipelining.schedules._wait_batch_p2p "
                                      "(its code, defaults or closure)"]
    finally:
        wait.__code__ = code


def test_a_method_or_data_added_to_a_schedule_class_is_named():
    """``step`` is inherited (``PipelineScheduleSingle``): set on ``ScheduleGPipe`` it shadows
    torch's; ``_live`` is R28-4's hiding place."""
    snap = Snapshot()
    assert "step" not in vars(ScheduleGPipe)
    ScheduleGPipe.step = lambda self, *a, **k: None
    ScheduleGPipe._live = [1]
    try:
        got = modified(snap, {})
    finally:
        del ScheduleGPipe.step, ScheduleGPipe._live
    assert sorted(got) == ["torch.distributed.pipelining.schedules.ScheduleGPipe._live (added)",
                           "torch.distributed.pipelining.schedules.ScheduleGPipe.step (added)"], got


def test_a_replaced_process_group_method_is_named_and_an_expected_patch_is_not():
    snap = Snapshot()
    recv, wait = dist.distributed_c10d.recv, PipelineStage._recv_meta
    dist.distributed_c10d.recv = lambda *a, **k: None        # as if the capture patched it
    PipelineStage._recv_meta = lambda *a, **k: None          # the train file
    try:
        got = modified(snap, {(id(dist.distributed_c10d), "recv"): dist.distributed_c10d.recv})
    finally:
        dist.distributed_c10d.recv, PipelineStage._recv_meta = recv, wait
    assert got == ["torch.distributed.pipelining.stage.PipelineStage._recv_meta"], got


def test_a_method_shadowed_on_an_instance_is_named():
    s = object.__new__(ScheduleGPipe)
    s._n_microbatches = 2                                    # data: not a method
    assert shadowed(s) == []
    s._step_microbatches = lambda *a, **k: None
    assert shadowed(s) == ["ScheduleGPipe._step_microbatches (set on the instance)"]


def test_the_capture_refuses_a_no_op_wait_while_its_own_patches_pass():
    with pipelining(HERE, cpu=True, in_meta=None) as rec:
        pp_capture._GUARD[0]()                               # the capture's patches: expected
        wait = schedules._wait_batch_p2p
        schedules._wait_batch_p2p = lambda works: None
        try:
            with pytest.raises(PlanError) as e:
                pp_capture._GUARD[0]()
        finally:
            schedules._wait_batch_p2p = wait
    msg = str(e.value)
    assert "torch's pipelining was modified by the train file" in msg
    assert "schedules._wait_batch_p2p is not torch's own" in msg
    assert rec.refusals == [msg]
    assert pp_capture._GUARD[0] is None


# one capture each (~6 s): CI runs copy and pickle; deepcopy and object.__new__ are `slow`
@pytest.mark.parametrize("how", ["copy", pytest.param("deepcopy", marks=pytest.mark.slow),
                                 "pickle", pytest.param("new", marks=pytest.mark.slow)])
def test_a_copy_of_a_schedule_outliving_the_step_is_found(how):
    built = object.__new__(ScheduleGPipe)
    built._n_microbatches = 2
    pp_capture._BUILT.append((weakref.ref(built), ScheduleGPipe))
    if how == "copy":
        kept = copy.copy(built)
    elif how == "deepcopy":
        kept = copy.deepcopy(built)
    elif how == "pickle":
        kept = pickle.loads(pickle.dumps(built))
    else:
        kept = object.__new__(ScheduleGPipe)
        kept.__dict__.update(built.__dict__)
    del built
    try:
        assert outliving_pipeline_objects() == ["ScheduleGPipe"]
        assert any(o is kept for o in live_pipeline_objects())
    finally:
        pp_capture._BUILT.clear()
    del kept
    assert live_pipeline_objects() == []


class _FakeWork:
    def __init__(self):
        self.calls = 0

    def wait(self):
        self.calls += 1
        return True


def test_a_schedule_transfer_never_waited_is_refused(monkeypatch):
    """Whatever skips torch's wait (a no-op ``_wait_batch_p2p`` installed and removed between
    two checks, a trace function jumping over ``w.wait()``), the works torch's schedule gets
    record whether they were waited: a receive must be by the next action, every transfer by
    the end of the step."""
    from types import SimpleNamespace

    import torch

    issued: list[_FakeWork] = []

    def fake_batch_p2p(ops, desc=None):
        issued.extend(_FakeWork() for _ in ops)
        return issued[-len(ops):]
    monkeypatch.setattr(schedules, "_batch_p2p", fake_batch_p2p)
    op = SimpleNamespace(op=object(), peer=1, tensor=torch.zeros(2))     # a receive
    with pipelining(HERE, cpu=True, in_meta=None) as rec:
        works = schedules._batch_p2p([op], desc="fwd_recv")
        with pytest.raises(PlanError) as e:
            pp_capture._GUARD[0]()
        schedules._wait_batch_p2p(works)                                 # torch's wait
        pp_capture._GUARD[0]()
    assert "a transfer of torch's pipeline schedule (fwd_recv) was not waited before " \
           "train_step returned" in str(e.value), e.value
    assert rec.refusals == [str(e.value)]
    assert [w.calls for w in issued] == [1]                              # waited once, through
    assert rec.events == ["RECV:1:(2,)"]


def test_what_a_stage_held_outliving_the_step_is_found_whatever_the_class_of_its_copy():
    """R30-2 (b): a ``copy.copy`` of the stage with its ``__class__`` parked on a class of the
    train file escapes the scan by class (:func:`live_pipeline_objects`), but shares the
    stage's receive infos and buffers, which are still alive when the step returned."""
    import abc

    import torch
    from torch.distributed.pipelining.stage import _RecvInfo

    built = object.__new__(PipelineStage)
    built.args_recv_info = {0: (_RecvInfo("recv_0", 0, torch.zeros(2), None),)}
    built.fwd_cache = {0: ((torch.ones(2),), [])}
    built.submod = torch.nn.Linear(2, 2)          # the user's module: never tracked
    pp_capture._BUILT.append((weakref.ref(built), PipelineStage))
    pp_capture._hold()

    class Parked(abc.ABC):
        pass
    kept = copy.copy(built)
    kept.__class__ = Parked
    del built
    try:
        assert outliving_pipeline_objects() == []       # the class scan misses it
        held = pp_capture.outliving_step_objects()
    finally:
        pp_capture._BUILT.clear()
        pp_capture._HELD.clear()
    assert sorted(held) == ["PipelineStage.args_recv_info[0][0]",            # the _RecvInfo
                            "PipelineStage.args_recv_info[0][0].buffer",
                            "PipelineStage.fwd_cache[0][0][0]"], held


def test_what_a_dead_stage_held_is_not_named():
    """Nor what outlives every step by design: an enum member (the stage's inference mode,
    ``gpt2_pp_tied``'s first false refusal), a chunk spec the train file may keep."""
    import torch
    from torch.distributed.pipelining._utils import InferenceMode
    from torch.distributed.pipelining.microbatch import TensorChunkSpec
    from torch.distributed.pipelining.stage import _RecvInfo

    built = object.__new__(PipelineStage)
    built.args_recv_info = {0: (_RecvInfo("recv_0", 0, torch.zeros(2), None),)}
    built.grads_input = [torch.ones(2)]
    built._inference_mode = InferenceMode.DYNAMIC
    built._args_chunk_spec = (_SPEC := TensorChunkSpec(0),)
    pp_capture._BUILT.append((weakref.ref(built), PipelineStage))
    pp_capture._hold()
    assert len(pp_capture._HELD) == 3
    del built
    try:
        assert outliving_pipeline_objects() == []
        assert pp_capture.outliving_step_objects() == []
    finally:
        pp_capture._BUILT.clear()
    assert pp_capture._HELD == [] and _SPEC.split_dim == 0
