"""What the user's ``parallelize`` may do to the model's values and state (adversarial findings
R39c-1 and R43e-3; ``tests/adversarial/ATTEMPTS.md``, "Stop 44").

The capture runs ``parallelize`` on ``meta`` tensors (no values) and then traces the step on
fresh inputs named as the parameters, so the proof assumes every name starts the step with the
weights ``build_model`` gave it (as the single-device model does) and every FSDP2 unit starts
it fresh. Two things break that unseen, and are refused (exit 3):

* a module's **forward** while ``parallelize`` (or the traced ``build_optimizer``) runs
  (:func:`no_forward`): for real FSDP2 decides its root there and keeps the root's unsharded
  parameters registered into step 1 (R43e-3), and a dry run is a way to change values;
* a **value change** (:func:`guarded`): an operator writing into the memory of a parameter or
  buffer ``build_model`` made (``copy_``, ``load_state_dict``, ``p.data.mul_``, an init, a
  collective), or a name left holding a tensor that is neither the one ``build_model`` made
  (same memory, shape, strides, offset; also as the local tensor of an all-``Replicate``
  DTensor: ``SequenceParallel``) nor ``distribute_tensor`` of it (TP's styles, or the user's
  own call): ``swap_tensors``, ``.data =``, a new ``Parameter`` or module holding
  copied values (R39c-1). Writes inside ``distribute_tensor`` (its broadcast of the source
  for ``Replicate``) are its own; values are assumed equal on every rank at ``build_model``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import torch
from torch.distributed.tensor.placement_types import Replicate
from torch.utils._python_dispatch import TorchDispatchMode

from spec_lang.errors import PlanError
from spec_lang.torch_frontend.storage_writes import storage_of, written
from spec_lang.torch_frontend.styles import _user_site
from spec_lang.torch_frontend.wrapper_names import state_dict_name

__all__ = ["no_forward", "guarded"]

_ADVICE = ("load or initialise weights after parallelize from the same state dict in both runs "
           "(docs/torch.md, 'Names are kept')")


@contextlib.contextmanager
def no_forward(path: str, what: str = "parallelize") -> Iterator[None]:
    """Refuse any module's forward while the block runs (R43e-3): FSDP2 would decide its root
    and hold unsharded parameters into the step. Refused at the forward and again after the
    block (the user's code may catch the first error).

    Raises:
        PlanError: ``site: a forward of <Module> in parallelize ...``."""
    seen: list[str] = []

    def pre(module: Any, args: Any) -> None:  # noqa: ARG001
        seen.append(f"{_user_site(path)}: a forward of {type(module).__name__} in {what} "
                    "(a dry run or a shape check): real FSDP2 would decide its root there and "
                    "keep unsharded parameters registered into the first step, which prove "
                    "--torch does not model (R43e-3); run forwards only in train_step")
        raise PlanError(seen[-1])

    h = torch.nn.modules.module.register_module_forward_pre_hook(pre)
    try:
        yield
    finally:
        h.remove()
    if seen:
        raise PlanError(seen[0])


def _geom(t: Any) -> tuple:
    return (storage_of(t), tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype)


def _tensors(model: Any) -> list[tuple[str, Any]]:
    return [(state_dict_name(n), t) for n, t in [*model.named_parameters(remove_duplicate=False),
                                                 *model.named_buffers(remove_duplicate=False)]
            if isinstance(t, torch.Tensor)]


class _Watch(TorchDispatchMode):
    """Writes into watched storages, outside ``distribute_tensor`` (first site per storage)."""

    def __init__(self, path: str, watched: dict[Any, str]) -> None:
        super().__init__()
        self.path, self.watched, self.writes, self.inside = path, watched, {}, [0]

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if not self.inside[0]:
            for t in written(func, args, kwargs):
                try:
                    key = storage_of(t)
                except (RuntimeError, NotImplementedError, TypeError):
                    continue
                if key in self.watched and key not in self.writes:
                    self.writes[key] = f"{_user_site(self.path)}: parallelize writes into " \
                        f"{self.watched[key]!r} ({func})"
        return func(*args, **kwargs)


class Guard:
    """State of one :func:`guarded` block; :meth:`check` the model ``parallelize`` returned."""

    def __init__(self, model: Any, path: str, line: int) -> None:
        self.path, self.line = path, line
        self.before = {n: (t, _geom(t)) for n, t in _tensors(model)}
        self.made: dict[Any, tuple[Any, tuple]] = {}       # local storage -> (DTensor, source)
        self.watch = _Watch(path, {g[0]: n for n, (_, g) in self.before.items()})

    def check(self, model: Any) -> None:
        """Every name ``build_model`` made still holds its tensor, unwritten, or
        ``distribute_tensor`` of it (module docstring; R39c-1).

        Raises:
            PlanError: ``site: parallelize writes into 'a.weight' ...`` or ``path:line:
                parallelize gave 'a.weight' a tensor ...``."""
        writes = self.watch.writes
        for n, t in _tensors(model):
            if n not in self.before:
                continue
            g0 = self.before[n][1]
            if g0[0] in writes:
                raise PlanError(f"{writes[g0[0]]}: prove --torch traces parameters without "
                                f"values, so the change is not in the proof (R39c-1); {_ADVICE}")
            local = getattr(t, "_local_tensor", None)
            if local is None and _geom(t) == g0:
                continue
            if local is not None and _geom(local) == g0 and tuple(t.shape) == g0[1] \
                    and all(type(p) is Replicate for p in t.placements):
                continue        # DTensor.from_local(p, mesh, [Replicate()]): SequenceParallel
            got = self.made.get(storage_of(local)) if local is not None else None
            if got is not None and got[1] == g0 and _geom(local) == _geom(got[0]._local_tensor) \
                    and t.placements == got[0].placements and t.shape == got[0].shape \
                    and t.device_mesh == got[0].device_mesh and storage_of(local) not in writes:
                continue
            raise PlanError(f"{self.path}:{self.line}: parallelize leaves {n!r} holding a tensor "
                            "that is neither the one build_model made (same memory and shape) "
                            "nor distribute_tensor of it (a new Parameter or module with copied "
                            "values, swap_tensors, .data =, a write): prove --torch traces "
                            "parameters without values and cannot tell that its values are the "
                            f"ones the single-device model starts from (R39c-1); {_ADVICE}")


@contextlib.contextmanager
def guarded(model: Any, path: str, line: int = 1, modules: Any = ()) -> Iterator[Guard]:
    """Run the block (the user's ``parallelize``) with forwards refused (:func:`no_forward`),
    writes into the model's tensors recorded and ``distribute_tensor`` calls recorded (by
    every module that binds it, ``modules``, the train file's, too); call
    :meth:`Guard.check` on the returned model after."""
    import torch.distributed.tensor._api as api  # noqa: PLC0415

    g = Guard(model, path, line)
    orig = api.distribute_tensor

    def distribute_tensor(tensor: Any, *a: Any, **k: Any) -> Any:
        g.watch.inside[0] += 1
        try:
            out = orig(tensor, *a, **k)
        finally:
            g.watch.inside[0] -= 1
        if out is not tensor and getattr(out, "_local_tensor", None) is not None \
                and getattr(tensor, "_local_tensor", None) is None:
            key = storage_of(out)
            g.made[key] = (out, _geom(tensor))
            g.watch.watched[key] = "a distribute_tensor result"
        return out

    bound = [m for m in {id(m): m for m in [*sys.modules.values(), *modules]}.values()
             if isinstance(getattr(m, "__dict__", None), dict)
             and m.__dict__.get("distribute_tensor") is orig]
    for m in bound:
        m.distribute_tensor = distribute_tensor
    try:
        with no_forward(path), g.watch:
            yield g
    finally:
        for m in bound:
            m.distribute_tensor = orig
