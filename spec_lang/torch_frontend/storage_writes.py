"""Writes into a tensor's memory, seen at the trace's fake tensor mode and counted per storage
(adversarial rounds 43a, 43c, 43e: R43a-1, R43c-2, R43e-1, R43e-4).

A version counter misses writes through ``p.data`` (a new tensor with its own counter over the
same memory), ``torch.distributed`` collectives (``c10d::allreduce_`` marks no ``Tensor(a!)``)
and ``set_data``. Every operator the traced step dispatches reaches the trace's
``FakeTensorMode``, also in code the autograd engine runs (a tensor hook, a
``Function.backward``) where no torch function mode is active; :func:`counted` wraps that
mode's ``dispatch`` for the traced ``train_step`` and counts, per storage, the operators that
write into it (:func:`written`). :func:`recompute.param_versions` adds the count of a
parameter's storage to its version counters, so each check built on them (a gathered view's
parameter written before its backward, :func:`recompute.gathered_then_written`; FSDP2's held
unsharded parameters gone stale, :mod:`fsdp_hold`; a pipeline stage's step leaf,
:mod:`pp_leaves`) sees such writes too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

from spec_lang.torch_frontend.own_guards import capture_own, check_guard

__all__ = ["storage_of", "written", "on_dispatch", "on_writes", "counted", "count"]

_COUNTS: dict[Any, int] = {}
_ON = [0]           # nesting depth of :func:`counted`


def storage_of(t: Any) -> Any:
    """A weak reference to the storage ``t`` (a tensor, or a DTensor's local tensor) holds:
    equal for two tensors sharing memory (``p`` and ``p.data``), fake tensors included."""
    from torch.multiprocessing.reductions import StorageWeakRef  # noqa: PLC0415

    t = getattr(t, "_local_tensor", t)
    return StorageWeakRef(t.untyped_storage())


def written(func: Any, args: tuple, kwargs: dict) -> list[Any]:
    """The tensors operator ``func`` writes into (its schema's ``Tensor(a!)`` arguments,
    ``out=`` included; every tensor argument of a ``c10d`` op, whose schema marks none:
    ``aliasing.is_c10d``, R43c-2), from its ``args`` / ``kwargs`` as a dispatch mode receives
    them."""
    if getattr(func, "namespace", "") == "c10d":
        return [t for v in (*args, *kwargs.values())
                for t in (v if isinstance(v, (list, tuple)) else (v,))
                if isinstance(t, torch.Tensor)]
    schema = getattr(func, "_schema", None)
    if schema is None or not schema.is_mutable:
        return []
    out = []
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        v = args[i] if i < len(args) else kwargs.get(arg.name)
        out += [t for t in (v if isinstance(v, (list, tuple)) else (v,))
                if isinstance(t, torch.Tensor)]
    return out


def count(t: Any) -> int:
    """How many operators wrote into ``t``'s storage while :func:`counted` was on (0 off)."""
    if not _ON[0] or t is None:
        return 0
    try:
        return _COUNTS.get(storage_of(t), 0)
    except (RuntimeError, NotImplementedError):     # a tensor without a storage
        return 0


@contextlib.contextmanager
def on_dispatch(seen: Callable[[Any, tuple, dict], None]) -> Iterator[None]:
    """Within the block (inside ``make_fx``), ``seen(func, args, kwargs)`` for every operator
    the trace's ``FakeTensorMode`` dispatches, before it runs (also in code the autograd
    engine runs, where no torch function mode is active); ``seen`` may raise to refuse it.
    The mode's ``dispatch`` is restored after the block. Nothing happens outside a fake
    tensor trace."""
    mode = torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE)  # noqa: SLF001
    if mode is None:
        yield
        return
    had, before = "dispatch" in vars(mode), mode.dispatch

    def dispatch(func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        seen(func, args, kwargs or {})
        return before(func, types, args, kwargs)

    mode.dispatch = capture_own(dispatch)
    try:
        yield
    finally:
        now = vars(mode).get("dispatch")
        if had:
            mode.dispatch = before
        else:
            vars(mode).pop("dispatch", None)
        check_guard(now, dispatch, "dispatch")       # the step left it as it was (R55d-1)


@contextlib.contextmanager
def on_writes(seen: Callable[[Any, Any], None]) -> Iterator[None]:
    """Within the block (inside ``make_fx``), ``seen(func, tensor)`` for every tensor an
    operator the trace's ``FakeTensorMode`` dispatches writes into (:func:`written`), before
    the operator runs; ``seen`` may raise to refuse it (:func:`on_dispatch`)."""
    def each(func: Any, args: tuple, kwargs: dict) -> None:
        for t in written(func, args, kwargs):
            seen(func, t)

    with on_dispatch(each):
        yield


def _count(func: Any, t: Any) -> None:
    try:
        ref = storage_of(t)
    except (RuntimeError, NotImplementedError):
        return
    _COUNTS[ref] = _COUNTS.get(ref, 0) + 1


@contextlib.contextmanager
def counted() -> Iterator[None]:
    """Within the block (the traced ``train_step``, inside ``make_fx``), count every write the
    trace's ``FakeTensorMode`` dispatches, per storage (:func:`on_writes`); the counts are
    dropped after it."""
    _ON[0] += 1
    try:
        with on_writes(_count):
            yield
    finally:
        _ON[0] -= 1
        if not _ON[0]:
            _COUNTS.clear()
