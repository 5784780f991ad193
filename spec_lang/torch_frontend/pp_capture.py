"""Capture of a pipelined step (``torch.distributed.pipelining``) on one rank (issue 11;
``docs/torch.md``, "Pipelining").

Under the fake process group a schedule cannot run entirely as torch ships it: its
static/dynamic shape vote (``_warmup_p2p``) reads a garbage ``.item()`` (a data-dependent guard
under ``make_fx``), and its metadata inference exchanges pickled metadata objects that never
arrive. So, while the step is traced, only those transfers are answered (the private APIs are
pinned in :data:`spec_lang.torch_frontend.version.PRIVATE_APIS`):

* **the vote's result is set**: every stage ``DYNAMIC``, what torch's vote gives without user
  metadata (user metadata is refused);
* **torch's own metadata inference runs, traced, in torch's order**
  (``_forward_metadata_inference`` / ``_backward_metadata_inference``): one extra forward of
  each stage before micro-batch 0 (on micro-batch 0's arguments on the first stage, on
  ``torch.empty`` buffers of the received metadata elsewhere) and one extra call of ``loss_fn``
  on the last stage, with their Python side effects and in-place buffer writes on the traced
  state; their tensor outputs are dead code. A received buffer is an ``empty_strided`` node
  the lowering has no rule for: anything computed from its (garbage) values is not provable.
  ``_recv_meta`` answers a later stage with the output metadata the previous stage's trace
  recorded (``in_meta``: shape, dtype, stride, ``requires_grad``; the front end captures the
  stages in order), and a stage's backward with the gradient metadata torch derives from its
  outputs (``_derive_grad_metas``); so a received activation requires grad exactly when the
  previous stage's traced output does (``_retrieve_recv_activations``);
* **the executed events are recorded** (``F<mb>``, ``B<mb>``, ``SEND``, ``RECV``,
  ``REDUCE_GRAD/<n>``), never the schedule's ``pipeline_order`` (which for 1F1B lists actions
  that do not run).

Refused (exit 3, the user's line): schedules other than ``ScheduleGPipe`` and
``Schedule1F1B`` (interleaved, looped, zero-bubble, DualPipeV: several stages per rank, or
weight-gradient actions), ``build_stage`` / ``pipeline()`` (the traced ``Pipe`` front end),
static metadata given by the user (what it says about ``requires_grad`` decides the program),
and more than one stage or schedule on a rank. A stage module wrapped by ``fully_shard``:
:mod:`pp_data_parallel`.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from spec_lang.errors import PlanError
from spec_lang.torch_frontend.all_reduce_mark import (foreign_modes, marking_all_reduce,
                                                     unmarked_all_reduces)
from spec_lang.torch_frontend.group_identity import name_of
from spec_lang.torch_frontend.op_guard import namespaces, tampered, watching
from spec_lang.torch_frontend.pp_data_parallel import StandInStage, check_stage_module
from spec_lang.torch_frontend.pp_guard import (PIPELINING_MODIFIED, current_snapshot, held_by,
                                               live_pipeline_objects, modified, shadowed,
                                               still_alive)
from spec_lang.torch_frontend.styles import _user_site
from spec_lang.torch_frontend.value_reads import patched

__all__ = ["PPRecord", "NeedsCpu", "pipelining", "SUPPORTED_SCHEDULES", "PP_DOC", "check_refusals",
           "empty_on", "module_buffers", "attr_at", "train_step_running",
           "outliving_pipeline_objects", "outliving_step_objects", "unmarked_all_reduces",
           "torch_as_left"]

PP_DOC = "docs/torch.md, 'Pipelining'"
SUPPORTED_SCHEDULES = ("ScheduleGPipe", "Schedule1F1B")
_IN_STEP = [0]      # > 0 while the train file's train_step runs (:func:`train_step_running`)
_BUILT: list[Any] = []    # (weak reference, class) of the stages and schedules the step built
_GUARD: list[Any] = [None]  # the check of torch's pipelining while a pipelining block runs
_HELD: list[Any] = []     # (weak reference, where) of what the stages and schedules held
_PATCHES: list[dict] = []  # the patches in place while a pipelining block runs (capture_patches)


@contextlib.contextmanager
def train_step_running() -> Iterator[None]:
    """Marks the block as the traced ``train_step``: a pipeline stage or schedule built
    elsewhere (``parallelize``, ``build_model``) persists across steps, and only one step is
    traced (adversarial round 26, R26-1: its receive buffers, and the hooks the step leaves on
    them, are reused by the next step, whose metadata inference does not run again)."""
    _IN_STEP[0] += 1
    try:
        yield
    finally:
        _IN_STEP[0] -= 1


def torch_as_left() -> None:
    """Torch's pipelining and ``torch.distributed`` as the parallel step leaves them, and every
    transfer of torch's schedule waited (:mod:`pp_guard`; R29-2).

    Raises:
        PlanError: something differs from torch's own.
    """
    if _GUARD[0] is not None:
        _GUARD[0]()


def outliving_pipeline_objects() -> list[str]:
    """The stages and schedules still alive once the step returned and garbage was collected:
    kept somewhere (a torch class's attribute, a registry) for the next step, which reuses
    their receive buffers (adversarial round 28, R28-4), whether built by their constructor or
    copied (``copy.copy``, ``deepcopy``, pickle, ``object.__new__``: R29-3; found by a scan of
    the collector's objects).
    """
    if not _BUILT:          # no stage was built: nothing to collect (every non-pipelined step)
        return []
    alive = {id(o): type(o).__name__ for o in live_pipeline_objects()}
    alive.update({id(o): type(o).__name__ for r, _ in _BUILT if (o := r()) is not None})
    _hold()
    _BUILT.clear()
    return sorted(alive.values())


def _hold() -> None:
    """Record what the stages and schedules built in the step hold now (:func:`pp_guard.
    held_by`), for :func:`outliving_step_objects`."""
    objs = [o for r, _ in _BUILT if (o := r()) is not None]
    known = {id(r()) for r, _ in _HELD if r() is not None}
    _HELD.extend((r, w) for r, w in held_by(objs) if id(r()) not in known)


def outliving_step_objects() -> list[str]:
    """Where the tensors and pipelining objects a stage or schedule held during the step
    (its receive buffers, ``_RecvInfo``, caches, gradients sent) were held, for each still
    alive once the capture returned and garbage was collected: a stage dies with the step
    (:func:`outliving_pipeline_objects`), so what it held is kept by something else, e.g. a
    copy of it parked under another class for the next step (adversarial round 30, R30-2)."""
    if not _HELD:
        return []
    try:
        return still_alive(_HELD)
    finally:
        _HELD.clear()


Meta = tuple[tuple[int, ...], str, tuple[int, ...], bool]
"""A stage input's or output's metadata: (shape, dtype, stride, requires_grad)."""


class NeedsCpu(PlanError):  # noqa: N818 -- control flow: re-capture on fake cpu tensors
    """A pipeline stage was built while the step's tensors are ``meta`` (a transfer cannot be
    traced on ``meta``: "No backend type associated with device type meta")."""


@dataclass
class PPRecord:
    """What one rank's pipelined step did.

    Attributes:
        stage: the stage index of this rank (None: no stage was built).
        n_stages: the number of stages.
        schedule: the schedule's class name.
        n_microbatches: its micro-batch count.
        events: the executed actions in order.
        in_meta: per stage input (shape, dtype) as used here.
        out_meta: this stage's output (shape, dtype) per output.
        refusals: messages of uses refused (raised where they happen, kept for the end).
    """

    stage: int | None = None
    n_stages: int | None = None
    schedule: str | None = None
    n_microbatches: int | None = None
    events: list[str] = field(default_factory=list)
    in_meta: list[Meta] | None = None
    out_meta: list[Meta] | None = None
    refusals: list[str] = field(default_factory=list)
    group: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "n_stages": self.n_stages, "schedule": self.schedule,
                "n_microbatches": self.n_microbatches, "events": list(self.events),
                "in_meta": self.in_meta, "out_meta": self.out_meta, "group": self.group}


def _message(site: str, what: str) -> str:
    return (f"{site}: {what} is not supported by prove --torch's pipelining ({PP_DOC}); "
            f"supported: {' and '.join(SUPPORTED_SCHEDULES)} with one PipelineStage per rank, "
            "torch deriving the stage metadata")


def _dtype(s: str) -> Any:
    import torch
    return getattr(torch, s.split(".", 1)[1])


@contextlib.contextmanager
def pipelining(path: str, *, cpu: bool, in_meta: list[Meta] | None
               ) -> Iterator[PPRecord]:
    """Within the block, a ``PipelineStage`` + ``ScheduleGPipe`` / ``Schedule1F1B`` runs under
    the fake process group (module docstring); anything else of ``torch.distributed.
    pipelining`` raises :class:`PlanError` naming the user's line. ``cpu``: the step's tensors
    are fake cpu tensors (else building a stage raises :class:`NeedsCpu`). ``in_meta``: this
    rank's stage input as the previous stage's trace recorded it (None on the first stage, or
    before it is known: then a later stage is refused)."""
    import torch
    from torch.distributed.pipelining import _IR, schedules, stage
    from torch.distributed.pipelining._utils import (
        InferenceMode,
        _derive_grad_metas,
        _StageBackwardMeta,
        _StageForwardMeta,
        _TensorMeta,
    )

    rec = PPRecord()
    snap = current_snapshot()     # before the train file ran (the capture child), else now
    base = stage._PipelineStageBase  # noqa: SLF001
    sched_base = schedules._PipelineSchedule  # noqa: SLF001
    saved: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, value: Any) -> None:
        saved.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, value)

    def refuse(what: str) -> None:
        msg = _message(_user_site(path), what)
        rec.refusals.append(msg)
        raise PlanError(msg)

    expected: dict[tuple[int, str], Any] = {}     # what the capture patches (below)

    def site() -> str:     # (when the step returned, no line of the train file runs: line 1)
        s = _user_site(path)
        return s if s != path else f"{path}:1"

    def guard() -> None:
        # torch's pipelining as the train file leaves it (round 29, R29-2), at every schedule
        # step, action and transfer, and when the step returned (:func:`pp_guard.modified`)
        what = modified(snap, expected | patched())     # (value_reads' own, R35d-2)
        for r, cls in _BUILT:
            if (o := r()) is not None:
                if type(o) is not cls:
                    what.append(f"the class of the {cls.__name__} (now {type(o).__name__})")
                what += shadowed(o)
        if what:
            msg = f"{site()}: " + PIPELINING_MODIFIED.format(what=", ".join(what[:3]))
            rec.refusals.append(msg)
            raise PlanError(msg)

    stage_init = base.__dict__["__init__"]

    def init_stage(self: Any, submod: Any, stage_index: int, num_stages: int, *a: Any,
                   **k: Any) -> None:
        if type(self) is not stage.PipelineStage:
            refuse(f"{type(self).__name__} (build_stage / a traced pipeline)")
        if rec.stage is not None:
            refuse("a second pipeline stage on one rank")
        if not cpu:
            rec.refusals.append("needs-cpu")
            raise NeedsCpu()
        if not _IN_STEP[0]:
            refuse(_OUTSIDE_STEP.format("PipelineStage"))
        check_stage_module(submod, refuse)     # fully_shard's stand-in: pp_data_parallel
        rec.stage, rec.n_stages = int(stage_index), int(num_stages)
        stage_init(self, submod, stage_index, num_stages, *a, **k)
        _BUILT.append((weakref.ref(self), type(self)))
        # the stage's group by the object the world made, not by its name (R33b-1): a group
        # renamed as another axis names no axis (refused by pp_frontend)
        rec.group = None if self.group is None else (
            name_of(self.group)[0] or f"?{getattr(self.group, 'group_name', None)} (renamed)")

    sched_init = sched_base.__dict__["__init__"]

    def init_schedule(self: Any, *a: Any, **k: Any) -> None:
        name = type(self).__name__
        if name not in SUPPORTED_SCHEDULES or type(self).__module__ != schedules.__name__:
            refuse(f"the pipeline schedule {name}")
        if not _IN_STEP[0]:
            refuse(_OUTSIDE_STEP.format(name))
        if rec.schedule is not None:
            refuse("a second pipeline schedule on one rank")
        rec.schedule = name
        sched_init(self, *a, **k)
        _BUILT.append((weakref.ref(self), type(self)))
        rec.n_microbatches = int(self._n_microbatches)  # noqa: SLF001

    def new_schedule(cls: Any, *a: Any, **k: Any) -> Any:  # noqa: ARG001
        # before the subclass's own constructor runs (the zero-bubble ones read the stage first)
        if cls.__name__ not in SUPPORTED_SCHEDULES or cls.__module__ != schedules.__name__:
            refuse(f"the pipeline schedule {cls.__name__}")
        return object.__new__(cls)

    def traced(cls: Any, *a: Any, **k: Any) -> Any:  # noqa: ARG001
        refuse("pipeline() (the traced Pipe front end)")

    def warmup(self: Any, stages: list[Any], has_backward: bool,  # noqa: ARG001
               p2p_done: bool) -> None:  # noqa: ARG001
        # the vote's result without user metadata (refused below): every stage votes DYNAMIC,
        # so the product is 0 (never its garbage .item() under the fake process group)
        for s in stages:
            s._inference_mode = InferenceMode.DYNAMIC  # noqa: SLF001

    ps = stage.PipelineStage
    prep_fwd = ps.__dict__["_prepare_forward_infra"]

    def prepare_forward(self: Any, num_microbatches: int, args: Any, kwargs: Any = None,
                        has_backward: bool = False) -> Any:
        if self._user_meta.has_any():  # noqa: SLF001
            refuse("static stage metadata given by the train file (input_args / output_args "
                   "/ input_grads / output_grads)")
        if kwargs:
            refuse("keyword arguments to schedule.step")
        if self.is_first and not (isinstance(args, tuple) and all(
                isinstance(x, torch.Tensor) for x in args)):
            refuse("non-tensor arguments to schedule.step")
        if rec.out_meta is not None:
            # eval then step (or a mode switch) infers the metadata again, and what a stage
            # receives then (``requires_grad`` under no_grad) is not what its first inference
            # recorded (round 23: R23-2)
            refuse("a second pipeline metadata inference in one step (schedule.eval and "
                   "schedule.step on one schedule, or a switch between them): run the "
                   "evaluation outside the traced train_step")
        if not self.is_first and in_meta is None:
            raise PlanError(f"{path}:1: the input of pipeline stage {self.stage_index} is not "
                            "known (the previous stage was not captured first)")
        # torch's own DYNAMIC metadata inference, traced: the stage's forward on micro-batch
        # 0's arguments (first stage) or on torch.empty buffers of the received metadata
        out = prep_fwd(self, num_microbatches, args, kwargs, has_backward)
        meta = self._stage_meta  # noqa: SLF001
        for m in (*meta.inputs, *meta.outputs):
            if type(m) is not _TensorMeta:
                refuse("a stage input or output that is not a plain tensor (a DTensor)")
        rec.in_meta = [_record(m) for m in meta.inputs]
        rec.out_meta = [_record(m) for m in meta.outputs]
        return out

    def recv_meta(self: Any, src_stage: int) -> Any:
        # the metadata the real previous / next stage sends (pickled objects cannot be
        # traced): its traced output's metadata, and for the backward the gradient metadata
        # torch derives from it (one per output that requires grad, else None)
        if src_stage == self.stage_index - 1:
            return _StageForwardMeta(forward_metas=tuple(
                _TensorMeta(torch.Size(s), tuple(st), _dtype(d), bool(rg))
                for s, d, st, rg in in_meta or ()))
        if src_stage == self.stage_index + 1:
            return _StageBackwardMeta(backward_metas=_derive_grad_metas(
                self._stage_meta.outputs))  # noqa: SLF001
        refuse(f"a metadata transfer from stage {src_stage} to stage {self.stage_index}")
        return None

    def send_meta(self: Any, meta: Any, dst_stage: int) -> None:  # noqa: ARG001
        return None     # read by the next stage's capture from rec.out_meta

    single = schedules.PipelineScheduleSingle
    step0 = single.__dict__["step"]

    def step(self: Any, *args: Any, target: Any = None, **k: Any) -> Any:
        # torch splits dim 0 with tensor_split; its receive buffers have micro-batch 0's
        # shape, so uneven micro-batches fail for real (shape errors), here with no message
        n = self._n_microbatches  # noqa: SLF001
        split = [(f"argument {i}", a) for i, a in enumerate(args)
                 if self._args_chunk_spec is None] + [("target", target)]  # noqa: SLF001
        for what, t in split:
            if isinstance(t, torch.Tensor) and t.dim() > 0 and t.shape[0] % n:
                msg = (f"{_user_site(path)}: schedule.step's {what} has a local batch of "
                       f"{t.shape[0]} (dim 0), which does not divide into {n} equal "
                       "micro-batches: the local batch must be a multiple of the micro-batch "
                       "count (torch's receive buffers have micro-batch 0's shape)")
                rec.refusals.append(msg)
                raise PlanError(msg)
        guard()
        out = dp.step_for(step0)(self, *args, target=target, **k)   # (pp_data_parallel)
        guard()
        _hold()
        all_waited("schedule.step returned", recv_only=False)
        return out

    def event(name: str, fn: Any) -> Any:
        def w(self: Any, *a: Any, **k: Any) -> Any:
            rec.events.append(f"{name}{a[0] if a else ''}")
            guard()
            all_waited(f"the stage computed {name}{a[0] if a else ''}", recv_only=True)
            return fn(self, *a, **k)
        return w

    dp = StandInStage(rec.events, rec.refusals, site)
    reduce_grad = dp.reduce_grad_for(base.__dict__["perform_reduce_grad"])

    def perform_reduce_grad(self: Any, factor: int) -> Any:
        rec.events.append(f"REDUCE_GRAD/{factor}")
        guard()
        all_waited("the gradients were reduced", recv_only=True)
        return reduce_grad(self, factor)

    batch_p2p = schedules._batch_p2p  # noqa: SLF001
    waited = [0]     # > 0 inside torch's schedule transfers and a synchronous send / recv

    works: list[_Work] = []    # the schedule transfers' works, as handed to torch's schedule

    def p2p(ops: list[Any], desc: str | None = None) -> Any:
        import torch.distributed as dist

        kinds = []
        for o in ops:
            kinds.append("SEND" if o.op in (dist.isend, dist.send) else "RECV")
            rec.events.append(f"{kinds[-1]}:{o.peer}:{tuple(o.tensor.shape)}")
        guard()
        modes = foreign_modes()
        if modes:     # it sees the transfers' ops and may answer them (R30-1)
            refuse(f"torch's schedule transfers issued under the train file's "
                   f"{modes[0]} (a torch function or dispatch mode)")
        before = [f"{w} before the transfers" for w in tampered()]
        classes = namespaces()
        found: list[str] = []
        waited[0] += 1
        try:
            with watching(found):      # R30c-1: what runs inside, at every op recorded
                out = batch_p2p(ops, desc)
        finally:
            waited[0] -= 1
        found += before + [f"{w} after the transfers" for w in tampered(before=classes)]
        if found:
            refuse(f"torch's schedule transfers not run as torch ships them ({found[0]}: a "
                   "mode of the train file, a hook or a trace function can answer them with "
                   "completed works)")
        if not isinstance(out, list):
            refuse(f"torch's schedule transfers returning {type(out).__name__}")
        out = [w if w is None else _Work(w, "RECV" in kinds, desc or "") for w in out]
        works.extend(w for w in out if w is not None)
        return out

    def all_waited(what: str, recv_only: bool) -> None:
        # torch's schedule waits a receive before the stage reads its buffer, a send by the end
        # of the step; the trace composes them so (R29-2: whatever skipped the wait)
        left = [w for w in works if not w.waited and (w.recv or not recv_only)]
        if left:
            msg = (f"{site()}: a transfer of torch's pipeline schedule "
                   f"({left[0].desc or ('a receive' if left[0].recv else 'a send')}) was not "
                   f"waited before {what}, as torch's schedule waits it: torch's pipelining was "
                   "modified by the train file (the trace composes the transfers as waited)")
            rec.refusals.append(msg)
            raise PlanError(msg)

    def synchronous(fn: Any) -> Any:
        def w(*a: Any, **k: Any) -> Any:
            waited[0] += 1
            try:
                return fn(*a, **k)
            finally:
                waited[0] -= 1
        return w

    def asynchronous(fn: Any, name: str) -> Any:
        # the trace records the transfer where it is issued, never where its work is waited:
        # a read of a receive buffer (or a write of a send buffer) before the wait would be
        # composed as if after it (adversarial round 26); torch's schedule waits before use
        def w(*a: Any, **k: Any) -> Any:
            if waited[0] == 0:
                refuse(f"dist.{name} in the train file (an asynchronous transfer, whose wait "
                       "is not traced: use dist.send / dist.recv)")
            return fn(*a, **k)
        return w

    patch(base, "__init__", init_stage)
    patch(sched_base, "__init__", init_schedule)
    had_new = "__new__" in sched_base.__dict__
    sched_base.__new__ = new_schedule
    patch(sched_base, "_warmup_p2p", warmup)
    patch(ps, "_prepare_forward_infra", prepare_forward)
    patch(single, "step", step)
    patch(ps, "_recv_meta", recv_meta)
    patch(ps, "_send_meta", send_meta)
    patch(base, "forward_one_chunk", event("F", base.__dict__["forward_one_chunk"]))
    patch(base, "backward_one_chunk", event("B", base.__dict__["backward_one_chunk"]))
    patch(base, "perform_reduce_grad", perform_reduce_grad)
    patch(base, "backward_maybe_with_nosync", dp.backward_for(base.__dict__[
        "backward_maybe_with_nosync"]))
    patch(schedules, "_batch_p2p", p2p)
    import torch.distributed as dist_ns
    from torch.distributed import distributed_c10d as c10d_mod
    marking = marking_all_reduce(c10d_mod.__dict__["all_reduce"], lambda: guard())
    for owner in (dist_ns, c10d_mod):
        patch(owner, "all_reduce", marking)
    for name in ("isend", "irecv", "batch_isend_irecv"):
        fn = asynchronous(c10d_mod.__dict__[name], name)
        patch(c10d_mod, name, fn)
        patch(dist_ns, name, fn)
    for name in ("send", "recv"):
        fn = synchronous(c10d_mod.__dict__[name])
        patch(c10d_mod, name, fn)
        patch(dist_ns, name, fn)
    from_tracing = _IR.Pipe.__dict__["from_tracing"]
    _IR.Pipe.from_tracing = classmethod(traced)
    expected.update({(id(o), n): o.__dict__[n] for o, n, _ in saved})
    expected[(id(_IR.Pipe), "from_tracing")] = _IR.Pipe.__dict__["from_tracing"]
    _PATCHES[:] = [expected]

    def at_step_end() -> None:
        guard()
        dp.at_end(site())
        all_waited("train_step returned", recv_only=False)
    _GUARD[0] = at_step_end
    _HELD.clear()
    try:
        yield rec
    finally:
        _GUARD[0] = None
        _PATCHES.clear()
        for owner, name, value in reversed(saved):
            setattr(owner, name, value)
        if not had_new:
            del sched_base.__new__
        _IR.Pipe.from_tracing = from_tracing


def capture_patches() -> dict[tuple[int, str], Any]:
    """What :func:`pipelining` has patched into torch now (``pp_guard.modified``'s
    ``expected``; empty outside it): :mod:`new_groups` compares torch.distributed with the
    snapshot while the train file's code runs (R36c-1)."""
    return dict(_PATCHES[0]) if _PATCHES else {}


class _Work:
    """A work of a schedule transfer as torch's schedule sees it: records that it was waited."""

    def __init__(self, work: Any, recv: bool, desc: str) -> None:
        self._work, self.recv, self.desc, self.waited = work, recv, desc, False

    def wait(self, *a: Any, **k: Any) -> Any:
        self.waited = True
        return self._work.wait(*a, **k)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._work, name)


_OUTSIDE_STEP = ("a {} built outside train_step (in parallelize or build_model: it is kept "
                 "across steps, with its receive buffers and what the step leaves on them, and "
                 "only one step is traced; build the stage and the schedule in train_step)")


def _record(m: Any) -> tuple[tuple[int, ...], str, tuple[int, ...], bool]:
    """A tensor metadata as the trace data keeps it: (shape, dtype, stride, requires_grad)."""
    return (tuple(int(x) for x in m.shape), str(m.dtype), tuple(int(x) for x in m.stride),
            bool(m.requires_grad))


def check_refusals(refusals: list[str]) -> None:
    msgs = [m for m in refusals if m != "needs-cpu"]
    if msgs:
        raise PlanError(msgs[0])


def empty_on(device: str) -> Any:
    """``torch.empty`` of the step's inputs: ``meta`` tensors, or for a pipelined step (a
    transfer cannot be traced on ``meta``) fake ``cpu`` tensors of one ``FakeTensorMode``,
    which ``make_fx`` adopts (no memory at any size)."""
    import torch

    if device == "meta":
        return lambda shape, dtype: torch.empty(shape, dtype=dtype, device="meta")
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    fm = FakeTensorMode(allow_fallback_kernels=True, shape_env=ShapeEnv(), static_shapes=True)

    def empty(shape: Any, dtype: Any) -> Any:
        with fm:
            return torch.empty(shape, dtype=dtype, device="cpu")
    return empty


def module_buffers(model: Any, built: Any, path: str) -> tuple[list[tuple[str, Any]],
                                                                  dict[str, str]]:
    """The buffers the step reads and writes through ``model`` (the module ``parallelize``
    returned): its registered buffers, and the built model's buffers it holds as plain tensor
    attributes (a hand-written pipeline stage's ``self.seen = model.seen``), named as the built
    model names them: the real program reads and writes that buffer through the attribute
    (R22-3). Returns the ``(name, tensor)`` list and each name's dotted attribute path.

    Raises:
        PlanError: two attributes holding one buffer, or an attribute holding a buffer under
            a registered buffer's name.
    """
    import torch
    from torch import nn

    bufs = list(model.named_buffers())
    where = {n: n for n, _ in bufs}
    seen = {id(b) for _, b in bufs}
    names = {id(b): n for n, b in built.named_buffers()}
    for mp, m in model.named_modules():
        for k, v in vars(m).items():
            if not isinstance(v, torch.Tensor) or isinstance(v, nn.Parameter) \
                    or id(v) not in names or k in m._buffers:  # noqa: SLF001
                continue
            n, at = names[id(v)], f"{mp}.{k}" if mp else k
            if id(v) in seen or n in where:
                raise PlanError(f"{path}:1: the model's buffer {n!r} is held by the module "
                                f"parallelize returned twice ({where.get(n)} and {at}): "
                                "not supported by prove --torch")
            bufs.append((n, v))
            where[n] = at
            seen.add(id(v))
    return bufs, where


def attr_at(obj: Any, dotted: str) -> Any:
    """``obj.a.b.c`` for ``"a.b.c"`` (a buffer's attribute path, :func:`module_buffers`)."""
    for k in dotted.split("."):
        obj = getattr(obj, k)
    return obj
