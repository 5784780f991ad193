"""A pipeline stage whose module is wrapped by ``fully_shard`` / FSDP-based ``replicate``
(torchtitan's PP x FSDP2; issue 11, ``docs/torch.md``, "Pipelining").

What torch 2.13 does for real (``stage.py``): for an ``FSDPModule`` stage module every
micro-batch backward (``backward_maybe_with_nosync``) runs with ``set_requires_gradient_sync
(False)`` / ``set_is_last_backward(False)`` / ``set_reshard_after_backward(False)``: the
unsharded gradients accumulate over the micro-batches, unreduced. After the last backward,
``perform_reduce_grad(n)`` (``n``: the micro-batch count, or 1 for ``scale_grads=False``) sets
them back to True, runs every FSDP parameter group's ``post_backward`` (the reduce-scatter of
the accumulated gradient, over the replicate axes the all-reduce, divided by the divide
factor) and the root's final callback, then ``scale_grads(n)`` (``p.grad /= n``). Both
supported schedules call ``perform_reduce_grad`` once, after every backward of the step.

The front end has no FSDP state: ``fully_shard`` is a stand-in (:mod:`dataparallel`) whose
unit view outside a pipeline stage reduces the gradient of each backward pass
(``GatherShard`` / ``AllReduceGrad``). For a stage module that is such a stand-in, while
``schedule.step`` runs, the stand-in holds FSDP2's real state instead (:mod:`pp_leaves`):

* the first forward of each unit makes, per parameter, ONE unsharded leaf for the step (the
  all-gather of the shard, detached, requiring grad; a DTensor leaf for a TP parameter), which
  every later forward, every backward and activation checkpointing's recomputation get;
  autograd accumulates each micro-batch's *local* gradient into its ``.grad``, as FSDP2's
  unsharded parameter with ``set_requires_gradient_sync(False)``;
* ``backward_maybe_with_nosync`` registers the leaves in the stage's modules (FSDP2's
  pre-backward unshard, kept by ``set_reshard_after_backward(False)``) and runs the plain
  backward (``stage_backward``, torch's branch for a module without data parallelism);
* ``perform_reduce_grad(n)`` reduces every leaf's gradient once (reduce-scatter over the shard
  axis, all-reduce over the replicate axes, ``/ factor``: ``GatherShard``'s backward applied
  to the sum), accumulates it into the stored parameter's ``.grad``, frees the leaf's gradient
  and registers the stored parameters back, then runs torch's ``scale_grads(n)`` (torch's
  argument, so ``scale_grads=False`` is followed as torch does).

A unit that reshards after its forward (``reshard_after_forward=True``, or left None on a unit
that is not the stage module) registers the stored parameters back after each forward, as
FSDP2 does; the stage module itself keeps the leaves (FSDP2's root does not reshard). So what
user code reads inside the step (``.grad``, ``is_leaf``, ``grad_fn``, the ``AccumulateGrad``
node, the parameter's identity across micro-batches) is the real run's, also where the
autograd engine runs it (a tensor hook: round 42b, R42b-1, which a torch function mode cannot
see). Still refused, as not modelled: a parameter written in place between its gather and the
reduction (:mod:`pp_leaves`; FSDP2 gathers again when it reshards), and, by
:class:`AutogradStateGuard` where a torch function mode sees it, ``.data``, ``_version`` and
storage access of the stage's parameters (writes that bypass the version counters).

Refused: a stage module that is an ``FSDPModule`` not made by the front end's stand-in (real
FSDP state the capture cannot trace), and a backward kind other than ``"full"`` (the split
input / weight backward of the zero-bubble schedules, refused earlier). Gradient accumulation
over several ``schedule.step`` calls is followed step by step (R41e-2): each step's backwards
are followed by that step's one reduction, and ``scale_grads`` divides the stored gradients,
earlier steps' included, as torch's does.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

from torch.overrides import TorchFunctionMode

from spec_lang.errors import PlanError
from spec_lang.torch_frontend import pp_leaves
from spec_lang.torch_frontend.pp_leaves import StepLeaves

__all__ = ["is_stand_in", "check_stage_module", "StandInStage", "STAND_IN_MARK",
           "STAND_IN_ASSUMPTION", "AutogradStateGuard", "REFUSED_ATTRIBUTES",
           "REFUSED_METHODS", "MODE_ESCAPES", "mode_escapes_refused"]

STAND_IN_MARK = ":fully_shard"
"""Appended to a stand-in stage's ``REDUCE_GRAD/<n>`` event (``REDUCE_GRAD/2:fully_shard``)."""

STAND_IN_ASSUMPTION = (
    "a pipeline stage whose module is wrapped by fully_shard / replicate (the events marked "
    "REDUCE_GRAD/<n>:fully_shard): as torch with set_requires_gradient_sync(False), each "
    "parameter has one unsharded leaf per schedule.step that accumulates the micro-batches' "
    "local gradients, reduced once by perform_reduce_grad (FSDP2's reduce-scatter, the "
    "replicate all-reduce and the divide factor, then scale_grads(n)); FSDP2's resharding "
    "between micro-batches is followed for the registered parameter only (a parameter "
    "written in place in the step, or its .data / storage touched, is refused) "
    "(docs/torch.md, 'Pipelining', step 7)")
"""What a verdict with such a stage assumes, in words (:func:`pp_frontend.pp_assumptions`)."""


def is_stand_in(module: Any) -> bool:
    """Whether ``module`` is an ``FSDPModule`` made by the front end's ``fully_shard`` /
    ``replicate`` stand-in (:func:`dataparallel._as_fsdp_module`), with no real FSDP state."""
    from torch.distributed.fsdp import FSDPModule

    from spec_lang.torch_frontend.dataparallel import own_class

    return isinstance(module, FSDPModule) and own_class(module) is not type(module)


def check_stage_module(submod: Any, refuse: Callable[[str], None]) -> None:
    """Refuse (``refuse(what)`` raises with the user's line) a stage module that is an
    ``FSDPModule`` but not the front end's stand-in: ``fully_shard`` / ``replicate`` applied
    outside ``parallelize`` (real FSDP state, whose post-backward torch's
    ``perform_reduce_grad`` reaches into)."""
    from torch.distributed.fsdp import FSDPModule

    if isinstance(submod, FSDPModule) and not is_stand_in(submod):
        refuse("a pipeline stage whose module is an FSDPModule not wrapped in parallelize "
               "(fully_shard / replicate called elsewhere)")


REFUSED_ATTRIBUTES = frozenset({"data", "_version"})
"""Attributes of a stage parameter :class:`AutogradStateGuard` refuses to read or set: ``.data``
(a write through it bumps no version counter, so the leaf written in the step would go
unseen) and ``._version`` (FSDP2's unsharded parameter's counter counts its all-gathers)."""

REFUSED_METHODS = frozenset({
    "untyped_storage", "storage", "_typed_storage", "data_ptr", "set_", "share_memory_",
    "_fix_weakref", "_use_count", "is_set_to", "__setstate__", "_make_subclass"})
"""Methods of a stage parameter that reach its storage past the version counters (FSDP2's
unsharded parameter shares the all-gather's storage, the capture's leaf does not)."""


class AutogradStateGuard(TorchFunctionMode):
    """Inside ``schedule.step`` of a stand-in stage, refuse what reaches a parameter's storage
    past its version counters (module docstring: :data:`REFUSED_ATTRIBUTES`,
    :data:`REFUSED_METHODS`; round 41e, R41e-1).

    The leaves (:mod:`pp_leaves`) make every other read of the autograd state the real run's,
    so ``.grad``, ``is_leaf``, ``grad_fn``, hooks and in-place methods (the version check of
    :mod:`pp_leaves`) pass since the faithful stand-in. A torch function mode is off inside
    the autograd engine (R42b-1): code the engine runs (a tensor hook) is not seen here.

    ``guarded``: the stage's parameters and their local shards when the step starts; the
    leaves and views the forwards get are added as :func:`dataparallel.unit_view` makes them
    (its ``VIEW_SINKS``). ``refuse(what)`` raises with the user's line. Torch's and the front
    end's own code passes: an access is refused when a frame of user code (outside torch, the
    standard library and the front end) lies between it and ``stop``, the code of the step
    wrapper (:meth:`StandInStage.step_for`).
    """

    def __init__(self, guarded: list[Any], refuse: Callable[[str], None], stop: Any) -> None:
        super().__init__()
        self.guarded, self.refuse, self.stop = guarded, refuse, stop  # (held: ids stay theirs)
        self.ids: set[int] = set()
        self.synced = 0                                 # guarded[:synced] are in ids
        self.on = True

    def _is_guarded(self, x: Any) -> bool:
        if self.synced < len(self.guarded):
            self.ids.update(id(g) for g in self.guarded[self.synced:])
            self.synced = len(self.guarded)
        return id(x) in self.ids

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        if self.on and args and self._is_guarded(args[0]):
            what = _autograd_state(func)
            if what and _from_user(sys._getframe(1), self.stop):  # noqa: SLF001
                self.refuse(f"{what} of a parameter of a pipeline stage wrapped by "
                            "fully_shard, inside schedule.step: FSDP2's unsharded parameter "
                            "shares the all-gather's storage, which the proof does not model "
                            "(docs/torch.md, 'Pipelining', step 7); use it after "
                            "schedule.step returns")
        return func(*args, **(kwargs or {}))


def _trusted(filename: str) -> bool:
    """Whether a frame's file is torch's, the front end's or the standard library's (not an
    installed package that lives under the standard library's directory, e.g. torchtitan)."""
    import os

    import torch

    import spec_lang.torch_frontend as fe
    from spec_lang.torch_frontend.op_guard import in_stdlib

    if filename.startswith(tuple(os.path.dirname(m.__file__) + os.sep for m in (torch, fe))):
        return True
    return in_stdlib(filename)


def _from_user(frame: Any, stop: Any) -> bool:
    """Whether user code runs between an access (``frame``: its caller) and the step wrapper
    (``stop``: its code): a frame whose file is not torch's, the standard library's or the
    front end's (code ``exec``'d from a string is the user's)."""
    if frame.f_globals.get("__name__", "").startswith("spec_lang.torch_frontend."):
        return False
    while frame is not None and frame.f_code is not stop:
        if not _trusted(frame.f_code.co_filename):
            return True
        frame = frame.f_back
    return frame is None


MODE_ESCAPES = (("torch._C", ("DisableTorchFunction", "_pop_torch_function_stack",
                              "_get_function_stack_at", "_set_torch_function_state",
                              "_set_skip_next_torch_function", "_skip_one_hop_torch_function")),
                ("torch.overrides", ("_pop_mode", "_pop_mode_temporarily",
                                     "_get_current_function_mode_stack",
                                     "_get_current_function_mode", "_get_function_stack_at",
                                     "_pop_torch_function_stack")))
"""What switches torch function modes off or hands them out (round 42a: R42a-2): while a
stand-in stage's step runs, calls of these from user code are refused
(:func:`mode_escapes_refused`). Names bound by the train file before the step (``from
torch._C import DisableTorchFunction``) are the R29-4 family (``docs/torch.md``)."""


@contextlib.contextmanager
def mode_escapes_refused(refuse: Callable[[str], None]) -> Iterator[None]:
    """Within the block, :data:`MODE_ESCAPES` called from user code (the immediate caller's
    file is not torch's, the front end's or the standard library's) call ``refuse(what)``."""
    import importlib

    saved = []
    for modname, names in MODE_ESCAPES:
        mod = importlib.import_module(modname)
        for name in names:
            orig = getattr(mod, name, None)
            if orig is None:
                continue

            def wrapper(*a: Any, _orig: Any = orig, _name: str = f"{modname}.{name}",
                        **k: Any) -> Any:
                if not _trusted(sys._getframe(1).f_code.co_filename):  # noqa: SLF001
                    refuse(f"{_name} inside schedule.step of a pipeline stage wrapped by "
                           "fully_shard (it would switch off the check of the stage's "
                           "parameters: docs/torch.md, 'Pipelining', step 7)")
                return _orig(*a, **k)

            saved.append((mod, name, orig))
            setattr(mod, name, wrapper)
    try:
        yield
    finally:
        for mod, name, orig in reversed(saved):
            setattr(mod, name, orig)


def _autograd_state(func: Any) -> str | None:
    """What ``func`` (as a torch function mode receives it) reaches of a tensor's storage past
    its version counters, in words, or None (any other op, attribute or method)."""
    name = getattr(func, "__name__", "")
    if name in ("__get__", "__set__", "__delete__"):
        attr = getattr(getattr(func, "__self__", None), "__name__", "?")
        if attr not in REFUSED_ATTRIBUTES:
            return None
        return f"{'reading' if name == '__get__' else 'setting'} .{attr}"
    if name in REFUSED_METHODS:
        return f".{name}()"
    return None


class StandInStage:
    """Torch's two data-parallel hooks of a pipeline stage, for the capture of one step
    (:func:`pp_capture.pipelining` patches them into ``_PipelineStageBase``).

    ``events``: the stage's executed events (``PPRecord.events``, ``REDUCE_GRAD/<n>`` appended
    before :meth:`perform_reduce_grad` runs); ``refusals``: where every refusal's message is
    kept (the train file may catch the error); ``site()``: the user's file:line now. A refusal
    raises ``PlanError`` with that line.
    """

    def __init__(self, events: list[str], refusals: list[str] | None = None,
                 site: Callable[[], str] | None = None) -> None:
        self.events = events
        self.refusals = refusals if refusals is not None else []
        self.site = site or (lambda: "train.py")
        self.step_start = 0          # events[step_start:]: the current schedule.step's
        self.pending = False         # a backward ran and no reduction followed it yet
        self.guard: AutogradStateGuard | None = None
        self.leaves: StepLeaves | None = None     # the step's unsharded leaves (pp_leaves)

    def _reductions(self) -> int:
        return sum(e.startswith("REDUCE_GRAD") for e in self.events[self.step_start:])

    def step_for(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """``schedule.step``: torch's ``original``, for a stand-in stage with the step's
        unsharded leaves active (:class:`pp_leaves.StepLeaves`) and under
        :class:`AutogradStateGuard` (its parameters and local shards guarded, and the leaves
        its forwards get), its events counted from here (R41e-2)."""

        def step(schedule: Any, *a: Any, **k: Any) -> Any:
            from spec_lang.torch_frontend import dataparallel

            self.step_start = len(self.events)
            stage = getattr(schedule, "_stage", None)
            if stage is None or not is_stand_in(stage.submod):
                return original(schedule, *a, **k)
            guarded = [t for p in stage.submod.parameters()
                       for t in (p, getattr(p, "_local_tensor", None)) if t is not None]
            self.guard = AutogradStateGuard(guarded, self._refuse_access, step.__code__)
            self.leaves = StepLeaves(stage.submod, self._refuse_access)
            dataparallel.VIEW_SINKS.append(guarded)
            pp_leaves.ACTIVE.append(self.leaves)
            try:
                with mode_escapes_refused(self._refuse_access), self.guard, \
                        self.leaves.writes_refused():
                    return original(schedule, *a, **k)
            finally:
                pp_leaves.ACTIVE.remove(self.leaves)
                dataparallel.VIEW_SINKS.remove(guarded)
                self.guard = None

        return step

    def _refuse_step(self, what: str) -> None:
        """A step-order refusal (a whole sentence), with where the docs say what is modelled."""
        self._refuse_access(f"{what} (docs/torch.md, 'Pipelining', step 7)")

    def _refuse_access(self, what: str) -> None:
        msg = f"{self.site()}: {what}"
        self.refusals.append(msg)      # refused even if the train file catches the error
        raise PlanError(msg)

    def backward_for(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """``backward_maybe_with_nosync``: for a stand-in stage module, torch's plain branch
        (``stage_backward`` of the micro-batch, no sync flags: autograd accumulates the local
        gradient into the leaves, module docstring; each unit's leaves are registered when the
        backward reaches it: :func:`pp_leaves.pre_backward_hooks`); for any other module
        torch's own ``original``.

        Raises:
            PlanError: (through ``refuse``) a backward kind other than ``"full"``, a backward
                outside ``schedule.step`` (R42a-4: the guard is on only there), a
                backward after torch's final reduction of the step (a direct call of the
                stage's backward: for real its gradient would stay unreduced), or torch's
                ``stage_backward`` failing (its cause named; R42a-3: a graph reused across
                micro-batches through the leaf's identity fails for real too).
        """

        def backward_maybe_with_nosync(stage: Any, backward_type: str, bwd_kwargs: dict,
                                       last_backward: bool = False) -> Any:
            if not is_stand_in(stage.submod):
                return original(stage, backward_type, bwd_kwargs, last_backward=last_backward)
            if backward_type != "full":
                self._refuse_step(f"a {backward_type!r} backward of a stage wrapped by "
                                  "fully_shard (a zero-bubble schedule's split backward) is "
                                  "not supported")
            if self.guard is None:      # R42a-4: schedule._step_microbatches called directly
                self._refuse_step("a backward of a stage wrapped by fully_shard outside "
                                  "schedule.step (torch's private step methods called "
                                  "directly) is not supported")
            if self._reductions():
                self._refuse_step("a backward of a stage wrapped by fully_shard after torch's "
                                  "final gradient reduction (perform_reduce_grad) of the same "
                                  "schedule.step is refused: for real its gradient is left "
                                  "unreduced")
            from torch.distributed.pipelining import stage as stage_mod

            self.pending = True      # (each unit's leaves: its pre-backward hook, pp_leaves)
            try:
                return (stage_mod.stage_backward(bwd_kwargs["stage_output"],
                                                 bwd_kwargs["output_grads"],
                                                 bwd_kwargs["input_values"]), None)
            except RuntimeError as e:    # torch's wrapper: a message of debug info only
                cause = e.__cause__ if isinstance(e.__cause__, Exception) else e
                first = next((ln.strip() for ln in str(cause).splitlines() if ln.strip()), "")
                self._refuse_step(f"the backward of a pipeline stage wrapped by fully_shard "
                                  f"failed with the step's unsharded leaves (as FSDP2's, one "
                                  f"per parameter for all micro-batches): "
                                  f"{type(cause).__name__}: {first}")
                raise

        return backward_maybe_with_nosync

    def reduce_grad_for(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """``perform_reduce_grad``: for a stand-in stage module the reduction of the step's
        leaves' accumulated gradients into the stored parameters
        (:meth:`pp_leaves.StepLeaves.reduce`), then torch's ``scale_grads(factor)`` when
        ``factor != 1``; for any other module torch's own ``original``.

        Raises:
            PlanError: (through ``refuse``) a second reduction in the step, a parameter
                written in place in the step.
        """

        def perform_reduce_grad(stage: Any, grad_scale_factor: int) -> Any:
            if not is_stand_in(stage.submod):
                return original(stage, grad_scale_factor)
            if self._reductions() > 1:
                self._refuse_step("a second gradient reduction (perform_reduce_grad) of a "
                                  "stage wrapped by fully_shard in one schedule.step is not "
                                  "supported")
            self.events[-1] += STAND_IN_MARK     # (pp_frontend.pp_assumptions)
            self.pending = False
            if self.guard is not None:
                self.guard.on = False            # the rest is torch's and the front end's
            if self.leaves is not None:
                self.leaves.reduce()
            if grad_scale_factor != 1:
                stage.scale_grads(grad_scale_factor)
            return None

        return perform_reduce_grad

    def at_end(self, site: str) -> None:
        """When the step returned: every backward of a stand-in stage was followed by torch's
        final reduction (``site``: the user's line for the message).

        Raises:
            PlanError: a backward ran and no reduction followed it (a direct call of the
                stage's backward, no schedule step after it).
        """
        if self.pending:
            raise PlanError(f"{site}: a backward of a pipeline stage wrapped by fully_shard ran "
                            "without torch's final gradient reduction (perform_reduce_grad, "
                            "run by schedule.step): for real its gradient is left unreduced")
