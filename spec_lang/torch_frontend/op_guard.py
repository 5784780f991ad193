"""What runs inside a collective or a schedule transfer while it is traced (adversarial rounds
30 and 30c: R30-1, R30c-1).

``dist.all_reduce`` and torch's schedule transfers are modelled as torch's own code issuing the
op and waiting the work the process group returns. A torch function or dispatch mode, a tensor
subclass, a hook of the train file reached from torch's code (a replaced ``torch.Tensor``
method, a dict subclass in ``distributed_c10d``'s state, a trace function) can answer the op
with a work that is already completed while the real transfer still runs. A look at the mode
stacks before the call misses a mode the train file enters *inside* it (R30c-1), and a look
while the op is recorded misses the train file's mode too: torch pops a mode off the stack
while its ``__torch_dispatch__`` runs. What the op's recording does see is the Python call
path: :func:`watching` checks, at every node the tracer records during the call, that every
frame between the call's entry and the recording runs code that existed before the train file
ran (:class:`Baseline`: torch's, the standard library's, ours) and that no mode but the
tracer's is active. :func:`tampered` compares, before and after each call, the things torch's
collective code reads and a hook could hide in: the mode stacks, the trace and profile
functions, ``distributed_c10d``'s state objects (``_world`` and its containers, by type, against
the baseline), the ``Work`` classes' namespaces (R31-1: also at every node recorded) and
``torch.Tensor``'s and ``TensorBase``'s class namespaces (changed during the
call).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import sys
import types
from collections.abc import Iterator
from typing import Any

__all__ = ["in_stdlib", "Baseline", "take_baseline", "current_baseline", "foreign_frame",
           "watching", "namespaces", "tampered", "work_changes"]

_BASELINE: list[Any] = [None]
_OWN_PREFIXES = ("torch", "spec_lang")


@functools.lru_cache(maxsize=4096)
def in_stdlib(filename: str) -> bool:
    """Whether ``filename`` is the standard library's (not an installed package that lives
    under the standard library's directory, e.g. torchtitan in a venv's site-packages)."""
    import os
    import site
    import sysconfig

    paths = sysconfig.get_paths()
    installed = {paths["purelib"], paths["platlib"], *site.getsitepackages(),
                 site.getusersitepackages()}
    return filename.startswith(paths["stdlib"] + os.sep) \
        and not filename.startswith(tuple(d + os.sep for d in installed))


def _codes_of(code: Any, into: set[int], keep: list[Any]) -> None:
    stack = [code]
    while stack:
        c = stack.pop()
        if id(c) in into:
            continue
        into.add(id(c))
        keep.append(c)
        stack.extend(k for k in c.co_consts if type(k) is types.CodeType)


def _c10d_state() -> dict[str, Any]:
    """``distributed_c10d``'s module-level containers and ``_world``'s attributes."""
    from torch.distributed import distributed_c10d as c10d

    out = {f"distributed_c10d.{k}": v for k, v in vars(c10d).items()
           if issubclass(type(v), (dict, list, set)) and not k.startswith("__")}
    out.update({f"distributed_c10d._world.{k}": v for k, v in vars(c10d._world).items()})  # noqa: SLF001
    return out


class Baseline:
    """What existed before the train file ran: the code of every function alive (and the code
    nested in it), every class, the types of ``distributed_c10d``'s state."""

    def __init__(self) -> None:
        import torch
        from torch.distributed import distributed_c10d as c10d

        self.codes: set[int] = set()
        self._keep: list[Any] = []
        self.types: set[int] = {id(t) for t in (str, int, float, bool, type(None), tuple,
                                                list, dict, set, frozenset, bytes, complex)}
        for o in gc.get_objects():
            t = type(o)
            if t is types.FunctionType:
                _codes_of(o.__code__, self.codes, self._keep)
            elif issubclass(t, type):
                self.types.add(id(o))
                self._keep.append(o)
        self.modules: set[int] = {id(vars(m)) for m in list(sys.modules.values())
                                  if isinstance(m, types.ModuleType)}
        self.lazy: dict[int, set[int]] = {}    # a module imported later: its code, on demand
        self.world = c10d._world  # noqa: SLF001
        # the containers' exact types (a dict subclass's ``__contains__`` runs code: R30c-1)
        self.state_types = {k: type(v) for k, v in _c10d_state().items()
                            if issubclass(type(v), (dict, list, set))}
        # the namespaces of torch's Work classes (a wait swapped inside the call: R31-1)
        self.works = {id(k): (k, dict(vars(k))) for k in _work_classes()}

    def own_code(self, frame: Any) -> bool:
        """Whether ``frame`` runs, in the namespace of the module that defines it, code that
        existed before the train file ran, or code of a torch module imported since."""
        g = frame.f_globals
        name = g.get("__name__")
        mod = sys.modules.get(name) if type(name) is str else None
        if mod is None or vars(mod) is not g:
            return False
        if id(frame.f_code) in self.codes:
            return True
        if id(g) in self.modules or not name.startswith(_OWN_PREFIXES):
            return False
        if id(g) not in self.lazy:
            codes: set[int] = set()
            for v in list(g.values()):
                for f in _functions_in(v):
                    _codes_of(f.__code__, codes, self._keep)
            self.lazy[id(g)] = codes
        return id(frame.f_code) in self.lazy[id(g)]


def _work_classes() -> list[type]:
    """``torch._C._distributed_c10d.Work``, its subclasses (``FakeWork`` among them) and the
    classes it inherits from but ``object`` (``pybind11_object``: a ``__getattribute__`` set
    there answers ``work.wait`` for every Work, R31d-1)."""
    from torch._C import _distributed_c10d as c

    out: list[type] = [b for b in (*c.Work.__mro__[1:], *type(c.Work).__mro__)
                       if b is not object and b is not type]
    todo = [c.Work]
    while todo:
        k = todo.pop()
        if k not in out:
            out.append(k)
            todo.extend(k.__subclasses__())
    return out


def work_changes(base: Baseline) -> list[str]:
    """The attributes of torch's ``Work`` classes that differ from the baseline (identity):
    a ``wait`` swapped for a no-op by a hook inside the call and put back by the no-op
    itself is seen while the op is recorded (adversarial round 31, R31-1)."""
    out = []
    for k, was in base.works.values():
        now = vars(k)
        for name in set(was) | set(now):
            if was.get(name, _MISSING) is not now.get(name, _MISSING):
                out.append(f"{k.__name__}.{name}")
    return sorted(out)


def _functions_in(v: Any) -> list[Any]:
    t = type(v)
    if t is types.FunctionType:
        return [v]
    if issubclass(t, (staticmethod, classmethod)):
        return _functions_in(v.__func__)
    if issubclass(t, type):
        return [f for x in list(vars(v).values()) if not issubclass(type(x), type)
                for f in _functions_in(x)]
    if issubclass(t, property):
        return [f for g in (v.fget, v.fset, v.fdel) if g is not None for f in _functions_in(g)]
    return []


def take_baseline() -> Baseline:
    """Record what exists now (the capture child calls it before the train file runs)."""
    _BASELINE[0] = Baseline()
    return _BASELINE[0]


def current_baseline() -> Baseline:
    """The baseline taken before the train file ran, or (none taken: the capture run in this
    process, as the tests do) one taken now and kept."""
    if _BASELINE[0] is None:
        _BASELINE[0] = Baseline()
    return _BASELINE[0]


def foreign_frame(entry: Any, base: Baseline, start: Any) -> str | None:
    """The first frame from ``start`` up to (not including) ``entry`` whose code is not
    :meth:`Baseline.own_code`, as ``file:line (function)``; None if there is none. ``entry``
    not on the path (the node recorded by another thread) is a finding too."""
    f = start
    while f is not None and f is not entry:
        if not base.own_code(f):
            return f"{f.f_code.co_filename}:{f.f_lineno} ({f.f_code.co_name})"
        f = f.f_back
    return None if f is entry else "a frame off the call's path (another thread)"


@contextlib.contextmanager
def watching(findings: list[str]) -> Iterator[None]:
    """Within the block (a collective or a schedule transfer, entered from its wrapper), every
    node the tracer records is checked: a torch function or dispatch mode other than the
    tracer's active, an attribute of torch's ``Work`` classes (or their bases) changed
    (:func:`work_changes`), or a frame of code that is not torch's own between the block's
    caller and the recording, appends a finding to ``findings`` (the call is then not
    modelled)."""
    from torch.fx.experimental.proxy_tensor import get_proxy_mode

    from spec_lang.torch_frontend.all_reduce_mark import foreign_modes

    mode = get_proxy_mode()
    graph = getattr(getattr(mode, "tracer", None), "graph", None)
    if graph is None:
        yield
        return
    base = current_baseline()
    entry = sys._getframe(2)    # the wrapper's frame (contextmanager's __enter__, then ours)  # noqa: SLF001

    def create_node(create: Any, *a: Any, **k: Any) -> Any:
        modes = foreign_modes()
        if modes:
            findings.append(f"the torch function or dispatch mode {modes[0]} was active")
        findings.extend(f"torch's {w} was replaced during the call" for w in work_changes(base))
        where = foreign_frame(entry, base, sys._getframe(1))  # noqa: SLF001
        if where is not None:
            findings.append(f"code of the train file ran inside the call, at {where} (a "
                            "torch function or dispatch mode, a tensor subclass or a hook)")
        return create(*a, **k)

    with create_node_hook(graph, create_node):
        yield


@contextlib.contextmanager
def create_node_hook(graph: Any, hook: Any) -> Iterator[None]:
    """Within the block, ``graph.create_node(*a, **k)`` is ``hook(create, *a, **k)`` with
    ``create`` the one in place before (chaining any hook set before); put back after, as an
    instance attribute or none. The one way the guards watch the nodes the tracer records
    (:func:`watching`, ``group_identity.checking``, ``thread_guard.watched``)."""
    had = "create_node" in vars(graph)
    before = vars(graph).get("create_node")
    graph.create_node = functools.partial(hook, graph.create_node)
    try:
        yield
    finally:
        if had:
            graph.create_node = before
        else:
            vars(graph).pop("create_node", None)


def namespaces() -> dict[int, dict[str, Any]]:
    """``torch.Tensor``'s and ``TensorBase``'s namespaces now (before a call), for
    :func:`tampered` after it."""
    import torch

    return {id(c): dict(vars(c)) for c in (torch.Tensor, torch._C.TensorBase)}  # noqa: SLF001


def tampered(base: Baseline | None = None,
             before: dict[int, dict[str, Any]] | None = None) -> list[str]:
    """What a hook of the train file could run from inside a collective, found now: a torch
    function or dispatch mode active, a trace or profile function set, ``distributed_c10d``'s
    ``_world`` replaced or a container of its state (``_world._pg_coalesce_state``, the
    module's registries) of another type than torch's or holding an object of a class made
    after the train file started; with ``before`` (:func:`namespaces` before the call),
    ``torch.Tensor``'s or ``TensorBase``'s namespace changed during the call. (A method of
    ``torch.Tensor`` replaced by the train file *around* the call is not refused by itself: it
    runs before the op, and whatever it leaves running at the op is on the op's path,
    :func:`watching`; ``r30c_02`` is right and stays EQUIVALENT.)"""
    import threading

    import torch
    from torch.distributed import distributed_c10d as c10d

    from spec_lang.torch_frontend.all_reduce_mark import foreign_modes
    from spec_lang.torch_frontend.dispatcher_guard import COLLECTIVE_NAMESPACES, kernel_changes

    base = base or current_baseline()
    out = [f"the torch function or dispatch mode {m} active" for m in foreign_modes()[:1]]
    if sys.gettrace() is not None or sys.getprofile() is not None \
            or threading.gettrace() is not None or threading.getprofile() is not None:
        out.append("a trace or profile function set (sys.settrace / setprofile)")
    for label, cls in (("torch.Tensor", torch.Tensor),
                       ("torch._C.TensorBase", torch._C.TensorBase)):  # noqa: SLF001
        was, now = (before or {}).get(id(cls)), vars(cls)
        for k in set(was or ()) | set(now if was is not None else ()):
            if was.get(k, _MISSING) is not now.get(k, _MISSING):
                out.append(f"{label}.{k} changed during the call")
                break
    out += [f"torch's {w} replaced" for w in work_changes(base)]
    out += [f"{w} (R31-2)" for w in kernel_changes(prefixes=COLLECTIVE_NAMESPACES)]
    if c10d._world is not base.world or type(base.world) is not c10d._World:  # noqa: SLF001
        out.append("distributed_c10d._world")
    for k, v in _c10d_state().items():
        want = base.state_types.get(k)
        if want is not None and type(v) is not want:
            out.append(f"{k} (a {type(v).__name__})")
        elif (bad := _new_class_in(v, base, 3)) is not None:
            out.append(f"{k} (holding a {bad})")
    return out


def _new_class_in(v: Any, base: Baseline, depth: int) -> str | None:
    """The name of a class made after the baseline of an object in ``v`` (through dicts,
    lists, sets and tuples, ``depth`` levels), or None."""
    if type(v).__flags__ & _HEAPTYPE and id(type(v)) not in base.types:
        return type(v).__name__
    if depth == 0 or type(v) not in (dict, list, set, tuple):
        return None
    items = [x for kv in v.items() for x in kv] if type(v) is dict else list(v)
    for x in items:
        if (bad := _new_class_in(x, base, depth - 1)) is not None:
            return bad
    return None


_MISSING = object()
_HEAPTYPE = 1 << 9      # Py_TPFLAGS_HEAPTYPE: a class made at run time (a static type is C's)
