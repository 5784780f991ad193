"""The dispatcher's kernels as torch ships them, while a train file is captured (adversarial
round 31, R31-2).

The capture traces on meta / fake tensors: the dispatcher runs torch's Meta and fake kernels of
every op, never the CPU or CUDA kernel the real run would. A train file that registers its own
kernel of an existing op (``torch.library.Library("c10d", "IMPL").impl("allreduce_", f, "CPU")``
answering with a completed Work and reducing nothing, or ``aten::div_.Tensor`` returning its
input) changes the real run and not the trace: nothing of it runs while the step is traced
(R31-2: EQUIVALENT on four plans whose real step is wrong).

:func:`take_snapshot` records, before the train file is imported, every operator's
registrations (``torch._C._dispatch_dump``: one ``KEY: registered at FILE:LINE`` line per
dispatch key) and the Python kernels of every ``torch._ops.OperatorBase`` alive (``py_kernels``,
``python_key_table``, ``functorch_table``: what ``OpOverload.py_impl`` registers, run under the
Python dispatcher that ``make_fx`` enables). :func:`kernel_changes` compares the dispatcher now
with it: any kernel of an operator that existed before, added, replaced or removed, and any new
operator in a namespace that existed before (``aten::div_.Mine``) unless all its registrations
are in torch's own Python files (``prims::inductor_random``, defined when a torch module the
train file imports is loaded), is a change; a Python kernel
that is not the same object as before and whose code did not exist before the train file ran
(:class:`spec_lang.torch_frontend.op_guard.Baseline`) is one too. A new operator in a namespace
of the train file's own is not: the lowering knows no such op and refuses it by name.

The worker checks after the train file is imported and after the step is captured; every
collective and schedule transfer checks the ``c10d`` and ``_c10d_functional`` operators before
and after it (:func:`spec_lang.torch_frontend.op_guard.tampered`). A kernel registered and
removed again between two of those points, both inside the step, is not seen (documented in
``docs/torch.md``, "What the capture trusts").
"""

from __future__ import annotations

import gc
import re
import types
from typing import Any

__all__ = ["DispatcherSnapshot", "take_snapshot", "current_snapshot", "kernel_changes",
           "COLLECTIVE_NAMESPACES"]

COLLECTIVE_NAMESPACES = ("c10d::", "_c10d_functional::")
_SNAPSHOT: list[Any] = [None]
_LINE = re.compile(r"^(?P<key>[A-Za-z0-9_]+(?: \(inactive\))?): registered at (?P<loc>.*?)"
                   r"(?: :: .*| \[.*)?$")
_TABLES = ("py_kernels", "python_key_table", "functorch_table")


def _registrations(name: str) -> dict[str, str]:
    """``{dispatch key: where its kernel was registered}`` of one operator."""
    import torch

    out: dict[str, str] = {}
    for line in torch._C._dispatch_dump(name).splitlines():  # noqa: SLF001
        m = _LINE.match(line)
        if m is not None:
            out[m["key"]] = m["loc"]
    return out


def _python_kernels() -> dict[int, tuple[Any, dict[str, Any]]]:
    """``{id(op): (op, {table.key: kernel})}`` of every ``OperatorBase`` alive."""
    from torch._ops import OperatorBase

    out: dict[int, tuple[Any, dict[str, Any]]] = {}
    for o in gc.get_objects():
        if issubclass(type(o), OperatorBase):   # (no __class__ lookup on odd objects)
            out[id(o)] = (o, {f"{t}.{k!r}": v for t in _TABLES
                              for k, v in dict(vars(o).get(t) or {}).items()})
    return out


class DispatcherSnapshot:
    """Every operator's registrations and every Python kernel, before the train file ran."""

    def __init__(self) -> None:
        import torch

        self.ops: dict[str, dict[str, str]] = {
            n: _registrations(n) for n in torch._C._dispatch_get_all_op_names()}  # noqa: SLF001
        self.namespaces = {n.split("::", 1)[0] for n in self.ops}
        self.python = _python_kernels()


def take_snapshot() -> DispatcherSnapshot:
    """Record the dispatcher now (in the capture child, before the train file is imported)."""
    _SNAPSHOT[0] = DispatcherSnapshot()
    return _SNAPSHOT[0]


def current_snapshot() -> DispatcherSnapshot | None:
    """The snapshot taken before the train file ran, or None (none taken in this process)."""
    return _SNAPSHOT[0]


def _own_kernel(fn: Any) -> bool:
    """Whether ``fn`` is a function whose code existed before the train file ran (or is in a
    torch module imported since, :meth:`Baseline.own_code`)."""
    from spec_lang.torch_frontend.op_guard import current_baseline

    code = getattr(fn, "__code__", None)
    if type(fn) is not types.FunctionType or type(code) is not types.CodeType:
        return False
    return current_baseline().own_code(types.SimpleNamespace(f_globals=fn.__globals__,
                                                             f_code=code))


def _torch_file(where: str) -> bool:
    """Whether a registration site ``FILE:LINE`` is a Python file of torch's installation (a
    torch module imported by the train file defines its operators: ``prims::inductor_random``
    when ``torch._inductor`` is)."""
    import os

    import torch

    path = where.rsplit(":", 1)[0]
    root = os.path.dirname(os.path.realpath(torch.__file__)) + os.sep
    return path.endswith(".py") and os.path.realpath(path).startswith(root) \
        and os.path.isfile(path)


def kernel_changes(snap: DispatcherSnapshot | None = None,
                   prefixes: tuple[str, ...] | None = None) -> list[str]:
    """The kernels that differ from ``snap`` (default: the snapshot taken), one line each
    (``"c10d::allreduce_'s CPU kernel, registered at train.py:21"``), every operator or only
    those whose name starts with one of ``prefixes``. Empty when none does, or when no
    snapshot was taken in this process."""
    import torch

    snap = snap or current_snapshot()
    if snap is None:
        return []
    out: list[str] = []
    names = torch._C._dispatch_get_all_op_names()  # noqa: SLF001
    if prefixes is not None:
        names = [n for n in names if n.startswith(prefixes)]
    for name in names:
        before = snap.ops.get(name)
        if before is None:
            if name.split("::", 1)[0] in snap.namespaces:
                foreign = [w for w in _registrations(name).values() if not _torch_file(w)]
                if foreign:
                    out.append(f"a new operator {name} in torch's namespace, registered at "
                               f"{foreign[0]}")
            continue
        now = _registrations(name)
        for key in sorted(set(before) | set(now)):
            if before.get(key) != now.get(key):
                what = ("removed" if key not in now else f"registered at {now[key]}")
                out.append(f"{name}'s {key} kernel {what}")
    if prefixes is None:
        for oid, (op, tables) in _python_kernels().items():
            was = snap.python.get(oid, (None, {}))[1] if snap.python.get(oid, (None,))[0] is op \
                else {}
            for k, fn in tables.items():
                if was.get(k) is not fn and not _own_kernel(fn):
                    out.append(f"{getattr(op, '_name', op)}'s Python kernel {k} "
                               f"({getattr(fn, '__qualname__', type(fn).__name__)})")
    return out
