"""Deep copies of the model in the capture: an EMA of the weights (adversarial round 46f,
R46f-4 / R46f-5, ``tests/adversarial/ATTEMPTS.md``).

Two right plans were refused with torch's internals:

* R46f-5 (r46f_07): ``EMA["m"] = copy.deepcopy(model)`` in ``parallelize`` (before
  ``replicate``), updated in the step under ``no_grad``. The model is built on ``meta``, so the
  copy's tensors are plain ``meta`` tensors (not the trace's fake tensors): the trace's
  ``FakeTensorMode`` raised "Please convert all Tensors to FakeTensors first".
  :func:`meta_constants` lets the fake mode take a plain ``meta`` tensor (of type
  ``torch.Tensor`` or ``nn.Parameter``) as a fake tensor; ``make_fx`` records it as a captured
  constant (a ``get_attr`` node holding the ``meta`` tensor), which
  :func:`lower._attr_value` lowers to an ``Opaque`` value: its values are not known, so
  nothing computed from it can be proved. The real run's copy is state the spec does not
  have (the EMA of every step so far); a plan that writes it back into the parameters
  (``p.copy_(e)``) or reads it into the loss has Opaque goals: never EQUIVALENT. A real (cpu)
  tensor made outside the step is refused as before (its values would be a constant the
  spec's own trace may not have).
* R46f-4 (r46f_03): ``copy.deepcopy(model.w0)`` in the step. torch's ``Tensor.__deepcopy__``
  of a ``meta`` fake tensor is ``clone()`` followed by a deep copy of the tensor's
  ``__dict__``, which for a ``FakeTensor`` holds its ``fake_mode``: the copy belonged to a
  second ``FakeTensorMode`` and the next in-place op on it recursed without end
  (RecursionError). :func:`fake_deepcopy` copies a fake tensor of the trace's mode as the real
  deep copy does its values: a traced ``clone`` (under ``no_grad``), ``requires_grad`` and the
  gradient copied, and the Python attributes the fake tensor's own construction did not set
  (the user's marks) deep-copied. The copy's values are the traced values of the original:
  what is computed from it is exact. A *parameter* (a fake tensor marked ``_is_param``) is
  refused with exit 3 naming the line: ``nn.Parameter.__deepcopy__`` copies the values and
  ``requires_grad`` only (R53b-4), a plain tensor's copy also the gradient and attributes,
  and the step can set the mark on a plain tensor itself (R53c-4), so the capture cannot tell
  which copy the real run makes. ``copy.deepcopy(model.w0)`` (r46f_03) is therefore refused
  with that reason, not a RecursionError.

Sources: ``torch/_tensor.py`` ``Tensor.__deepcopy__``; ``torch/_subclasses/fake_tensor.py``
``FakeTensorMode.validate_and_convert_non_fake_tensors`` (torch 2.13).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

__all__ = ["ALIAS", "PARAM", "SHARED", "fake_deepcopy", "meta_constants", "plain_meta"]


def plain_meta(x: Any) -> bool:
    """``x`` is a plain ``meta`` tensor (no fake tensor, no tensor subclass but
    ``nn.Parameter``): it has shapes and no values."""
    import torch
    from torch import nn

    return type(x) in (torch.Tensor, nn.Parameter) and x.device.type == "meta"


def _versions(g: Any) -> Any:
    """``Tensor._version`` that refuses (recorded in ``g`` and raised) a read of a plain meta
    tensor's version by code that is neither torch's nor shardproof's: the one Python trace
    of its writes, which the step's fingerprint leaves out (``step_state``)."""
    import sys
    from pathlib import Path

    import torch

    from spec_lang.errors import PlanError
    from spec_lang.torch_frontend.thread_guard import user_line

    base = torch._C.TensorBase._version  # noqa: SLF001
    ours = (f"{Path(torch.__file__).parent}/", f"{Path(__file__).parents[1]}/")

    def version(self: Any) -> int:
        f = sys._getframe(1)  # noqa: SLF001
        if plain_meta(self) and not f.f_code.co_filename.startswith(ours):
            raise PlanError(g.note(user_line(g.path), "the step reads the version counter of a "
                                   "tensor held outside the model on meta (an EMA copied in "
                                   "parallelize), whose writes the capture does not compare "
                                   "(R46f-5): do not branch on t._version", thread=False))
        return base.__get__(self)
    return property(version)


@contextlib.contextmanager
def meta_constants(mode: Any, g: Any = None) -> Iterator[None]:
    """Within the block, ``mode`` (the trace's ``FakeTensorMode``) converts a plain ``meta``
    tensor argument to a fake tensor instead of raising (module docstring, R46f-5); every
    other non-fake tensor is left to torch's check (it raises as before). With ``g``
    (``thread_guard._Guard``), ``t._version`` of a plain meta tensor is refused outside torch's
    code (:func:`_versions`). Given back on exit.
    """
    if mode is None:
        yield
        return
    import torch

    from spec_lang.torch_frontend.value_reads import _PATCHED  # what pp_guard takes as torch's

    if g is not None:
        torch.Tensor._version = _versions(g)  # noqa: SLF001
        _PATCHED[(id(torch.Tensor), "_version")] = vars(torch.Tensor)["_version"]
    had = "validate_and_convert_non_fake_tensors" in vars(mode)
    before = mode.validate_and_convert_non_fake_tensors

    seen: dict[int, Any] = {}       # plain meta tensors let through once (kept: ids stay)

    def fake(a: Any) -> Any:
        if id(a) not in seen:
            if a._base is not None or _use_count(a) > _use_count(torch.empty(0, device="meta")):
                # it shares memory with a tensor of the model (a view or ``detach()`` of a
                # parameter made in parallelize): a write to it is one to the parameter for
                # real, to a constant in the capture (R53b-2)
                from spec_lang.errors import PlanError
                from spec_lang.torch_frontend.thread_guard import user_line

                raise PlanError(g.note(user_line(g.path), ALIAS, thread=False)
                                if g is not None else ALIAS)
            seen[id(a)] = a
        return converter_of[0].from_real_tensor(mode, a)

    converter_of: list[Any] = [None]

    def validate(func: Any, converter: Any, flat_args: Any, args_spec: Any) -> Any:
        converter_of[0] = converter
        flat = [fake(a) if plain_meta(a) else a for a in flat_args]
        return before(func, converter, flat, args_spec)

    from spec_lang.torch_frontend.own_guards import capture_own, check_guard

    mode.validate_and_convert_non_fake_tensors = capture_own(validate)
    try:
        yield
    finally:
        if g is not None:
            del torch.Tensor._version  # noqa: SLF001
            _PATCHED.pop((id(torch.Tensor), "_version"), None)
        now = vars(mode).get("validate_and_convert_non_fake_tensors")
        if had:
            mode.validate_and_convert_non_fake_tensors = before
        else:
            vars(mode).pop("validate_and_convert_non_fake_tensors", None)
        check_guard(now, validate, "validate_and_convert_non_fake_tensors")   # (R55d-1)


ALIAS = ("the step uses a tensor held outside the model on meta that shares memory with "
         "another tensor (a view or detach() of a parameter or buffer made before the step): "
         "its writes are the other tensor's for real, which the capture does not follow "
         "(R53b-2): hold a copy (copy.deepcopy, clone()) instead")


def _use_count(t: Any) -> int:
    """How many holders ``t``'s storage has (tensors sharing it, measured alike)."""
    import torch

    return torch._C._storage_Use_Count(t.untyped_storage()._cdata)  # noqa: SLF001


PARAM = ("copy.deepcopy of a parameter (or of a module holding one) in the step: the capture "
         "cannot tell a parameter from a tensor marked as one, whose copies differ (R53c-4): "
         "make the copy in parallelize, or copy the values with p.detach().clone()")


SHARED = ("copy.deepcopy of a tensor that shares memory with another one (a view: the copies "
          "would share it too, which the capture does not follow): deep-copy the module whose "
          "parameters are not views, or copy the tensors with clone()")


def fake_deepcopy(original: Any, g: Any = None) -> Any:
    """``__deepcopy__`` for a fake tensor of the running trace (module docstring, R46f-4);
    any other tensor (a real one, a fake tensor of another mode, a tensor that is no graph
    leaf: torch raises) goes to ``original``. A view, or a second tensor of one storage in the
    same copy, is refused (``PlanError``, recorded in ``g``): the real copies share memory.

    Shapes: the copy has the original's shape, dtype, device and strides (``clone``)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor

    def deepcopy(self: Any, memo: Any = None) -> Any:
        mode = torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE)  # noqa: SLF001
        if (type(self) is not FakeTensor or mode is None or self.fake_mode is not mode
                or not self.is_leaf):
            return original(self, memo)
        memo = {} if memo is None else memo
        if id(self) in memo:
            return memo[id(self)]
        # for real, tensors sharing memory (a view and its base, two views of one buffer)
        # share it in the copy too; clones would not: refused (exit 3)
        key = ("shardproof storage", self.untyped_storage()._cdata)  # noqa: SLF001
        if self._base is not None or memo.get(key, self) is not self:
            from spec_lang.errors import PlanError
            from spec_lang.torch_frontend.thread_guard import user_line

            raise PlanError(g.note(user_line(g.path), SHARED, thread=False) if g is not None
                            else SHARED)
        memo[key] = self
        with torch.no_grad():
            new = self.clone()
        if self.requires_grad:
            new.requires_grad_()
        if vars(self).get("_is_param"):
            # a parameter's copy (``nn.Parameter.__deepcopy__``: values and requires_grad only,
            # R53b-4) and a plain tensor's (gradient and attributes too) differ, and in the
            # capture both are fake tensors marked ``_is_param``, a mark the step can set
            # itself (R53c-4): refused (exit 3)
            from spec_lang.errors import PlanError
            from spec_lang.torch_frontend.thread_guard import user_line

            raise PlanError(g.note(user_line(g.path), PARAM, thread=False) if g is not None
                            else PARAM)
        if self.grad is not None:
            new.grad = copy.deepcopy(self.grad, memo)
        own = set(vars(new))        # the fake tensor's own state (its fake_mode, device...)
        for k, v in list(vars(self).items()):
            if k not in own:
                vars(new)[k] = copy.deepcopy(v, memo)
        memo[id(self)] = new
        return new
    deepcopy.__name__ = "__deepcopy__"
    return deepcopy
