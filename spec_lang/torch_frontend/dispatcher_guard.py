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
train file imports is loaded), is a change; a Python kernel (``_dispatch_cache`` too) that is not the same object as before
must be torch's: a function of a torch module whose code existed before the train file ran
(:class:`spec_lang.torch_frontend.op_guard.Baseline`), or the dispatch key torch resolves its
key to (rounds 32, 32b). A new operator in a namespace of the train file's own is not a change:
the lowering knows no such op and refuses it by name.

The worker checks after the train file is imported and after the step is captured; every
collective and schedule transfer checks the ``c10d`` and ``_c10d_functional`` operators before
and after it (:func:`spec_lang.torch_frontend.op_guard.tampered`). What happens *between* those
points is logged as it happens, so a kernel registered and removed again inside the step is
seen: every ``torch.library`` library made and every kernel registered through one
(``_LoggedModule``; in the step, on an operator that existed, wherever the library was made:
R32b-3), every enabling of the Python dispatcher by the train file's own code (R32b-2), every
``HigherOrderOperator`` the train file makes (R32d-1). Not seen (``docs/torch.md``): a train
file that reaches the originals these wrappers keep (their closures and globals) or replaces
the builtins the comparison calls (R32b-3 r32b_06, R32b-5, R32d-2, R32d-3: the R29-4 family).
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import sys
import types
from collections.abc import Iterator
from typing import Any

import torch
from torch._ops import OperatorBase

__all__ = ["DispatcherSnapshot", "take_snapshot", "installed", "step_starts",
           "current_snapshot", "kernel_changes", "COLLECTIVE_NAMESPACES"]

COLLECTIVE_NAMESPACES = ("c10d::", "_c10d_functional::")
_SNAPSHOT: list[Any] = [None]
# ``KEY: registered at FILE:LINE ...``, alias keys too (``CompositeExplicitAutograd[alias]``:
# R32-1, the kernel a CPU run takes when the op has no CPU kernel of its own)
_LINE = re.compile(r"^(?P<key>[^:]+): registered at (?P<loc>.*?)(?: :: .*| \[.*)?$")
_TABLES = ("py_kernels", "python_key_table", "functorch_table", "_dispatch_cache")
# what the guard calls, bound when it is imported (before the train file is): a train file
# that puts its own ``torch._C._dispatch_dump`` or ``gc.get_objects`` in place answers for
# nothing here (R32-2)
_DUMP = torch._C._dispatch_dump  # noqa: SLF001
_ALL_OPS = torch._C._dispatch_get_all_op_names  # noqa: SLF001
_TLS_INCLUDED = torch._C._dispatch_tls_local_include_set  # noqa: SLF001
_PYTHON_DISPATCHER = torch._C.DispatchKey.PythonDispatcher  # noqa: SLF001
_LIBRARY = torch._C._dispatch_library  # noqa: SLF001
_TLS_SET_INCLUDED = torch._C._dispatch_tls_set_dispatch_key_included  # noqa: SLF001
_GC_OBJECTS = gc.get_objects
_OPERATOR_BASE = OperatorBase
_RESOLVE_KEY = torch._ops.resolve_key  # noqa: SLF001
_DISPATCH_KEY = torch._C.DispatchKey  # noqa: SLF001


def _registrations(name: str, text: str | None = None) -> dict[str, str]:
    """``{dispatch key (alias keys too): the dump's line of its kernel}`` of one operator, and
    every other line of the dump under its own text (a line the pattern does not read is still
    compared: R32-1). ``text``: the operator's dump, read already."""
    out: dict[str, str] = {}
    for line in (_DUMP(name) if text is None else text).splitlines():
        m = _LINE.match(line)
        out[m["key"] if m is not None else line] = line
    return out


def _where(line: str) -> str:
    m = _LINE.match(line)
    return m["loc"] if m is not None else line


def _python_kernels() -> dict[int, tuple[Any, tuple[dict[Any, Any], ...]]]:
    """``{id(op): (op, (a copy of each table of _TABLES))}`` of every ``OperatorBase`` alive
    (its ``_dispatch_cache`` too, which the Python dispatcher reads first: R32-3)."""
    out: dict[int, tuple[Any, tuple[dict[Any, Any], ...]]] = {}
    for o in _GC_OBJECTS():
        if issubclass(type(o), _OPERATOR_BASE):   # (no __class__ lookup on odd objects)
            d = vars(o)
            out[id(o)] = (o, tuple(dict(d.get(t) or {}) for t in _TABLES))
    return out


class DispatcherSnapshot:
    """Every operator's dump (its registrations) and every Python kernel, before the train file
    ran; ``libraries``: the ``torch.library`` libraries made since (kind, namespace,
    file:line), kept even when the library is destroyed again (R32-4)."""

    def __init__(self) -> None:
        # each operator's dump as read; its registrations (:func:`_registrations`, a function
        # of the dump) are parsed when a later dump differs from it, and only then
        self.ops: dict[str, str] = {n: _DUMP(n) for n in _ALL_OPS()}
        self.namespaces = {n.split("::", 1)[0] for n in self.ops}
        self.python = _python_kernels()
        self.libraries: list[tuple[str, str, str]] = []
        # (method, op name or dispatch key, namespace, in the step, library site) of every
        # kernel registered through those libraries (R32b-3)
        self.impls: list[tuple[str, str, str, bool, str]] = []
        self.in_step = False
        self.dispatcher_on: list[str] = []   # where the train file enabled the Python dispatcher
        self.hops: list[str] = []            # HigherOrderOperators the train file made


def _load_torchs_lazy_kernels() -> None:
    """Register now the kernels torch registers on first use (``torch.vmap`` and eager
    ``flex_attention`` load vmap's decompositions into ``aten``'s ``FuncTorchBatched`` key,
    ``torch/_functorch/predispatch.py``): registered after the snapshot they would be a change
    (R32-5, a false refusal)."""
    try:
        from torch._functorch.predispatch import lazy_load_decompositions
    except ImportError:   # (another torch: its lazy kernels, if any, are a change)
        return
    lazy_load_decompositions()


class _LoggedModule:
    """torch's ``_DispatchModule`` (what ``torch._C._dispatch_library`` makes), its kernel
    registrations logged in the snapshot (round 32b, R32b-3)."""

    _LOGGED = ("impl", "impl_t_t", "impl_with_aoti_compile", "fallback", "fallback_fallthrough")

    def __init__(self, m: Any, ns: str, where: str, snap: DispatcherSnapshot) -> None:
        self._m, self._ns, self._where, self._snap = m, ns, where, snap

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._m, name)
        if name not in self._LOGGED:
            return attr

        def logged(*a: Any, **k: Any) -> Any:
            what = a[1] if name == "impl_with_aoti_compile" and len(a) > 1 else \
                a[0] if a else "?"
            self._snap.impls.append((name, str(what), self._ns, self._snap.in_step,
                                     self._where))
            return attr(*a, **k)
        return logged


def step_starts() -> None:
    """From now on a kernel registered on an operator that existed is a change wherever its
    library was made (the worker calls it once the train file is imported and checked)."""
    if _SNAPSHOT[0] is not None:
        _SNAPSHOT[0].in_step = True


def take_snapshot() -> DispatcherSnapshot:
    """Record the dispatcher now (in the capture child, before the train file is imported),
    and from now on every ``torch.library`` library made (``torch._C._dispatch_library``)."""
    _load_torchs_lazy_kernels()
    snap = _SNAPSHOT[0] = DispatcherSnapshot()

    def dispatch_library(kind: Any, ns: Any, key: Any, *rest: Any) -> Any:
        where = ":".join(str(x) for x in rest[:2]) if rest else "an unknown place"
        snap.libraries.append((str(kind), str(ns), where))
        return _LoggedModule(_LIBRARY(kind, ns, key, *rest), str(ns), where, snap)

    torch._C._dispatch_library = dispatch_library  # noqa: SLF001
    _log_python_dispatcher(snap)
    _log_higher_order_operators(snap)
    return snap


@contextlib.contextmanager
def installed() -> Iterator[DispatcherSnapshot]:
    """:func:`take_snapshot` for the time of a ``with`` block, then torch as it was: the
    wrapped ``torch._C`` functions, every torch module's binding of
    ``_EnablePythonDispatcher``, ``HigherOrderOperator.__init__`` and the snapshot slot (the
    capture child never needs this; an in-process caller, a test, does)."""
    from torch._ops import HigherOrderOperator

    c = torch._C  # noqa: SLF001
    saved = (c._dispatch_library, c._EnablePythonDispatcher,  # noqa: SLF001
             c._dispatch_tls_set_dispatch_key_included, HigherOrderOperator.__init__,  # noqa: SLF001
             _SNAPSHOT[0])
    try:
        yield take_snapshot()
    finally:
        wrapper = c._EnablePythonDispatcher  # noqa: SLF001
        for mod in list(sys.modules.values()):
            ns = getattr(mod, "__dict__", None)
            if type(ns) is dict and getattr(mod, "__name__", "").startswith("torch"):
                for k in [k for k, v in ns.items() if v is wrapper]:
                    ns[k] = saved[1]
        (c._dispatch_library, c._EnablePythonDispatcher,  # noqa: SLF001
         c._dispatch_tls_set_dispatch_key_included, HigherOrderOperator.__init__,  # noqa: SLF001
         _SNAPSHOT[0]) = saved


def _log_higher_order_operators(snap: DispatcherSnapshot) -> None:
    """Log every ``HigherOrderOperator`` made by the train file's own code (the code calling
    ``HigherOrderOperator.__init__`` is not :meth:`Baseline.own_code`): a HOP picks its
    kernel in Python, one kernel for the capture's modes and another for the CPU run, with no
    library and no Python dispatcher to log (round 32d, R32d-1); torch's own HOPs are made by
    torch's code."""
    from torch._ops import HigherOrderOperator

    from spec_lang.torch_frontend.op_guard import current_baseline

    init = HigherOrderOperator.__init__

    def logged_init(self: Any, name: Any, *a: Any, **k: Any) -> None:
        f = sys._getframe(1)  # noqa: SLF001
        while f is not None and f.f_code.co_name == "__init__" and "self" in f.f_locals \
                and f.f_locals["self"] is self:   # a subclass's __init__: who made it
            if not current_baseline().own_code(f):
                break
            f = f.f_back
        mod = sys.modules.get(str(f.f_globals.get("__name__"))) if f is not None else None
        torch_module_code = f is not None and f.f_code.co_name == "<module>" and \
            mod is not None and vars(mod) is f.f_globals and mod.__name__.startswith("torch.")
        if f is not None and not torch_module_code and not current_baseline().own_code(f):
            snap.hops.append(f"{name} at {f.f_code.co_filename}:{f.f_lineno}")
        init(self, name, *a, **k)

    HigherOrderOperator.__init__ = logged_init


def _log_python_dispatcher(snap: DispatcherSnapshot) -> None:
    """Log every enabling of the Python dispatcher by the train file's own code (the caller's
    frame is not :meth:`Baseline.own_code`): in the real run it makes ``py_kernels`` run, a
    kernel put there and removed again inside the step is never in a snapshot (round 32b,
    R32b-2); make_fx enables it from torch's code, which is not logged."""
    from torch._dispatch import python as dispatch_python

    from spec_lang.torch_frontend.op_guard import current_baseline

    enable, included = torch._C._EnablePythonDispatcher, _TLS_SET_INCLUDED  # noqa: SLF001

    def by_train_file() -> None:
        f = sys._getframe(2)  # noqa: SLF001
        if not current_baseline().own_code(f):
            snap.dispatcher_on.append(f"{f.f_code.co_filename}:{f.f_lineno}")

    def enable_python_dispatcher(*a: Any, **k: Any) -> Any:
        by_train_file()
        return enable(*a, **k)

    def set_included(key: Any, *a: Any, **k: Any) -> Any:
        if key == _PYTHON_DISPATCHER:
            by_train_file()
        return included(key, *a, **k)

    torch._C._EnablePythonDispatcher = enable_python_dispatcher  # noqa: SLF001
    dispatch_python.enable_python_dispatcher = enable_python_dispatcher
    for mod in list(sys.modules.values()):   # every name torch's modules bound it to
        ns = getattr(mod, "__dict__", None)
        if type(ns) is dict and getattr(mod, "__name__", "").startswith("torch"):
            for k in [k for k, v in ns.items() if v is enable]:
                ns[k] = enable_python_dispatcher
    torch._C._dispatch_tls_set_dispatch_key_included = set_included  # noqa: SLF001


def current_snapshot() -> DispatcherSnapshot | None:
    """The snapshot taken before the train file ran, or None (none taken in this process)."""
    return _SNAPSHOT[0]


def _own_kernel(fn: Any, key: Any = None, op: Any = None) -> bool:
    """Whether ``fn`` is torch's: the dispatch key torch resolves ``key`` to
    (``_dispatch_cache[k]`` holds ``k`` or ``torch._ops.resolve_key(op, k)`` for a C++ kernel;
    ``DispatchKey.Meta`` under ``CPU`` runs the Meta kernel for real: round 32b, R32b-2), or a
    function of a torch module whose code existed before the train file ran (or
    is in a torch module imported since, :meth:`Baseline.own_code`). A function of another
    module is not, however old (``typing.assert_type`` as a CPU kernel: R32-3)."""
    from spec_lang.torch_frontend.op_guard import current_baseline

    if type(fn) is _DISPATCH_KEY:
        try:
            return fn == key or (op is not None and fn == _RESOLVE_KEY(op, key))
        except Exception:  # noqa: BLE001 -- a key torch cannot resolve is not torch's answer
            return False
    code = getattr(fn, "__code__", None)
    if type(fn) is not types.FunctionType or type(code) is not types.CodeType:
        return False
    mod = fn.__globals__.get("__name__")
    if type(mod) is not str or not (mod == "torch" or mod.startswith("torch.")):
        return False
    return current_baseline().own_code(types.SimpleNamespace(f_globals=fn.__globals__,
                                                             f_code=code))


def _torch_file(where: str) -> bool:
    """Whether a registration site ``FILE:LINE`` is a Python file of torch's installation (a
    torch module imported by the train file defines its operators: ``prims::inductor_random``
    when ``torch._inductor`` is)."""
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
    snap = snap or current_snapshot()
    if snap is None:
        return []
    out: list[str] = []
    if prefixes is None and _TLS_INCLUDED().has(_PYTHON_DISPATCHER):
        out.append("the Python dispatcher enabled (torch._C._EnablePythonDispatcher), which "
                   "runs Python kernels the real run would take and the capture does not")
    out += [f"the Python dispatcher enabled by the train file at {w}" for w in
            snap.dispatcher_on[:1] if prefixes is None]
    out += [f"a HigherOrderOperator made by the train file: {w}" for w in snap.hops[:1]]
    for kind, ns, where in snap.libraries:
        if kind != "DEF" and ns in snap.namespaces and not _torch_file(where):
            out.append(f"a torch.library {kind} library of torch's namespace {ns!r} made at "
                       f"{where}")
    # a kernel of an operator that existed, registered in the step, wherever its library was
    # made (``torch.library.impl`` makes it in torch's library.py; a site can be forged) and
    # even if removed again (R32b-3); a backend fallback made since the snapshot
    for how, what, ns, in_step, where in snap.impls:
        full = what if "::" in what else f"{ns}::{what}"
        if how.startswith("fallback") and (in_step or not _torch_file(where)):
            out.append(f"a backend fallback for {what} registered by a library made at {where}")
        elif in_step and (full in snap.ops or any(o.startswith(full + ".") for o in snap.ops)):
            out.append(f"{full}'s kernel registered in the step ({how}; library made at "
                       f"{where})")
    names = _ALL_OPS()
    if prefixes is not None:
        names = [n for n in names if n.startswith(prefixes)]
    for name in names:
        was = snap.ops.get(name)
        if was is None:
            if name.split("::", 1)[0] in snap.namespaces:
                foreign = [_where(w) for w in _registrations(name).values()
                           if _LINE.match(w) is not None and not _torch_file(_where(w))]
                if foreign:
                    out.append(f"a new operator {name} in torch's namespace, registered at "
                               f"{foreign[0]}")
            continue
        text = _DUMP(name)
        if text == was:
            continue                   # the same dump: the same registrations, no change
        before, now = _registrations(name, was), _registrations(name, text)
        for key in sorted(set(before) | set(now)):
            if before.get(key) != now.get(key):
                what = ("removed" if key not in now else f"registered at {_where(now[key])}")
                out.append(f"{name}'s {key} kernel {what}")
    if prefixes is None:
        for oid, (op, tables) in _python_kernels().items():
            old = snap.python.get(oid)
            was = old[1] if old is not None and old[0] is op else ({},) * len(_TABLES)
            for t, now, before in zip(_TABLES, tables, was):
                for key, fn in now.items():
                    if before.get(key) is not fn and not _own_kernel(fn, key, op):
                        out.append(f"{getattr(op, '_name', op)}'s Python kernel {t}.{key!r} "
                                   f"({getattr(fn, '__qualname__', type(fn).__name__)})")
    return out
