"""Torch's pipelining as the train file leaves it: what a pipelined step's capture trusts to be
torch's own code (``docs/torch.md``, "Pipelining").

The trace records a schedule's transfers where they are issued, never where they are waited:
:mod:`pp_merge` composes them as torch's schedule uses them, waited (``_wait_batch_p2p``) before
any read. A train file that replaces a piece of that code for the step (``schedules.
_wait_batch_p2p = lambda works: None``, restored afterwards: adversarial round 29, R29-2), a
``Work.wait``, a method of ``PipelineStage`` or of a schedule, the code of one of their functions,
or an instance attribute shadowing one, would run a program the trace cannot tell from torch's.

:func:`take_snapshot` records, before the train file runs, every callable attribute (with its
code, defaults and closure) of torch's pipelining modules, of ``torch.distributed``,
``distributed_c10d`` and ``torch._C._distributed_c10d``, and of the classes they define;
:func:`modified` compares the live modules with it, except what the capture patches itself
(``expected``), and names what differs. :func:`live_pipeline_objects` finds every live stage
and schedule (a ``copy.copy``, a ``deepcopy``, a pickle round trip or ``object.__new__`` runs no
constructor: adversarial round 29, R29-3).
"""

from __future__ import annotations

import gc
import sys
import types
import weakref
from collections.abc import Mapping
from typing import Any

__all__ = ["Snapshot", "take_snapshot", "current_snapshot", "modified", "shadowed",
           "live_pipeline_objects", "PIPELINING_MODIFIED", "held_by", "still_alive"]

PIPELINING_MODIFIED = ("torch's pipelining was modified by the train file: {what} is not torch's "
                       "own (the schedule's transfers are composed as torch waits them); leave "
                       "torch.distributed.pipelining and torch.distributed as torch ships them")

_MISSING = object()
_SNAPSHOT: list[Any] = [None]     # the one taken before the train file ran (the capture child)


def _namespaces() -> list[tuple[str, Any, bool]]:
    """(label, owner, whether a data attribute added to it counts) for every module and class
    watched: torch's pipelining modules and their classes (any attribute added to one counts),
    ``torch.distributed``, ``distributed_c10d``, ``torch._C._distributed_c10d`` and their
    classes (code added counts)."""
    import torch.distributed as dist
    import torch.distributed.pipelining  # noqa: F401 -- loads its submodules
    from torch._C import _distributed_c10d
    from torch.distributed import distributed_c10d

    mods = [(k, m) for k, m in sorted((kv for kv in list(dict.items(sys.modules))
                                       if type(kv[0]) is str), key=lambda kv: kv[0])
            if k == "torch.distributed.pipelining" or k.startswith("torch.distributed.pipelining.")]
    mods += [(m.__name__, m) for m in (dist, distributed_c10d, _distributed_c10d)]
    out: list[tuple[str, Any, bool]] = []
    seen: set[int] = set()
    for name, m in mods:
        pp = name.startswith("torch.distributed.pipelining")
        if id(m) not in seen:
            seen.add(id(m))
            out.append((name, m, False))
        for v in list(vars(m).values()):
            if issubclass(type(v), type) and str(v.__module__).startswith("torch") \
                    and id(v) not in seen:
                seen.add(id(v))
                own = str(v.__module__).startswith("torch.distributed.pipelining")
                out.append((f"{v.__module__}.{v.__qualname__}", v, pp and own))
    return out


def _is_code(v: Any) -> bool:
    # by ``type(v)``: never an attribute of ``v`` (``dist.reduce_op`` warns on any access)
    t = type(v)
    return (callable(v) or issubclass(t, (staticmethod, classmethod, property))) \
        and not issubclass(t, types.ModuleType)


def _functions(v: Any, depth: int = 0) -> list[Any]:
    """The Python functions behind ``v`` (a descriptor's, a wrapper's, those in its closure)."""
    if depth > 3:
        return []
    if issubclass(type(v), (staticmethod, classmethod)):
        return _functions(v.__func__, depth + 1)
    if issubclass(type(v), property):
        return [f for g in (v.fget, v.fset, v.fdel) if g is not None
                for f in _functions(g, depth + 1)]
    if type(v) is not types.FunctionType:
        return []
    out = [v]
    for c in v.__closure__ or ():
        try:
            out += _functions(c.cell_contents, depth + 1)
        except ValueError:          # an empty cell
            pass
    w = v.__dict__.get("__wrapped__")
    if w is not None:
        out += _functions(w, depth + 1)
    return out


def _fingerprint(v: Any) -> tuple:
    """What a function of ``v`` runs: its code, defaults and the code in its closure, by
    identity."""
    parts: list[Any] = []
    for f in _functions(v):
        cells = []
        for c in f.__closure__ or ():     # the code it calls (a counter it keeps may change)
            try:
                x = c.cell_contents
            except ValueError:
                x = None
            cells.append(id(x) if _is_code(x) else None)
        parts.append((id(f), id(f.__code__), id(f.__defaults__), id(f.__kwdefaults__),
                      tuple(cells)))
    return tuple(parts)


class Snapshot:
    """Every watched module's and class's attributes as they were (their code by identity)."""

    def __init__(self) -> None:
        self.owners: list[tuple[str, Any, bool]] = _namespaces()
        self.attrs: dict[int, dict[str, Any]] = {}
        self.prints: dict[tuple[int, str], tuple] = {}
        self._keep: list[Any] = []          # the values, alive while compared by identity
        for _, owner, _ in self.owners:
            d = dict(vars(owner))
            self.attrs[id(owner)] = d
            self._keep.append(d)
            for k, v in d.items():
                if _is_code(v):
                    self.prints[(id(owner), k)] = _fingerprint(v)


def take_snapshot() -> Snapshot:
    """Record torch's pipelining as it is now; :func:`current_snapshot` returns it from then on
    (the capture child calls it before the train file runs)."""
    _SNAPSHOT[0] = Snapshot()
    return _SNAPSHOT[0]


def current_snapshot() -> Snapshot:
    """The snapshot taken before the train file ran, or (none taken: the capture run in this
    process, as the tests do) one taken now."""
    return _SNAPSHOT[0] if _SNAPSHOT[0] is not None else Snapshot()


def modified(snap: Snapshot, expected: Mapping[tuple[int, str], Any]) -> list[str]:
    """What differs from ``snap`` in the watched modules and classes: a callable replaced,
    removed or added (or its code, defaults or closure changed), a module attribute rebound
    (``schedules.dist = <a copy of torch.distributed>``: adversarial round 30, R30-3), a data
    attribute added to one of torch's pipelining classes or modules; ``expected``: ``(id(owner), name) -> value`` the
    capture patched in itself (``_MISSING``-free: what the attribute must be now)."""
    out: list[str] = []
    for label, owner, data_too in snap.owners:
        before = snap.attrs[id(owner)]
        now = vars(owner)
        for k, v in before.items():
            want = expected.get((id(owner), k), v)
            cur = now.get(k, _MISSING)
            if not _is_code(v) and not issubclass(type(v), types.ModuleType) \
                    and (id(owner), k) not in expected:
                continue   # data (counters, registries); a module by identity (R30-3)
            if cur is not want:
                out.append(f"{label}.{k}" + (" (removed)" if cur is _MISSING else ""))
            elif _is_code(v) and _fingerprint(v) != snap.prints.get((id(owner), k)):
                # torch's function (which a patch of the capture calls in its place)
                out.append(f"{label}.{k} (its code, defaults or closure)")
        for k, cur in list(now.items()):
            if k in before or (id(owner), k) in expected or (k.startswith("__")
                                                             and k.endswith("__")):
                continue
            if _is_code(cur) or (data_too and not issubclass(type(cur), types.ModuleType)):
                out.append(f"{label}.{k} (added)")
    return out


def shadowed(obj: Any) -> list[str]:
    """The instance attributes of ``obj`` (a stage or a schedule) that shadow a method of its
    class (``schedule._step_microbatches = ...``)."""
    cls = type(obj)
    out = []
    for k in list(getattr(obj, "__dict__", {})):
        for c in cls.__mro__:
            if k in vars(c):
                if _is_code(vars(c)[k]) and not issubclass(type(vars(c)[k]), type):
                    out.append(f"{cls.__name__}.{k} (set on the instance)")
                break
    return out


GC_FROZEN = ("the garbage collector is frozen (gc.freeze) when the step returns: objects it "
             "keeps for the next step (a copy of a stage or schedule) cannot be found; do not "
             "call gc.freeze in the train file")


def live_pipeline_objects() -> list[Any]:
    """Every live instance of torch's pipeline stage and schedule classes (and subclasses),
    after a garbage collection: found by a scan of the collector's objects, so copies made
    without a constructor count.

    Raises:
        PlanError: the collector is frozen (``gc.freeze`` hides objects from the scan:
            adversarial round 30, R30-2).
    """
    from torch.distributed.pipelining import schedules, stage

    from spec_lang.errors import PlanError

    if gc.get_freeze_count():
        raise PlanError(GC_FROZEN)
    kinds = (stage._PipelineStageBase, schedules._PipelineSchedule)  # noqa: SLF001
    gc.collect()
    return [o for o in gc.get_objects() if issubclass(type(o), kinds)]


def held_by(objs: list[Any], depth: int = 5) -> list[tuple[Any, str]]:
    """Weak references to what the stages and schedules ``objs`` hold for a step, with where:
    every tensor (receive buffers, ``_RecvInfo.buffer``, the forward and backward caches, the
    gradients sent) and every ``_RecvInfo`` reached from their ``__dict__`` through dicts,
    lists, tuples and the ``__dict__`` of objects of torch's pipelining classes (not an enum
    member or a chunk spec: those may be the train file's constants, alive for good); never a
    module or a process group (adversarial round 30,
    R30-2: a copy of a stage or schedule made without a constructor and parked under another
    class shares all of these with the original, so they outlive the step with it)."""
    import enum

    import torch
    from torch.distributed.pipelining import schedules, stage
    from torch.distributed.pipelining.stage import _RecvInfo

    roots = (stage._PipelineStageBase, schedules._PipelineSchedule)  # noqa: SLF001
    out: list[tuple[Any, str]] = []
    seen: set[int] = set()

    def visit(v: Any, where: str, d: int) -> None:
        if id(v) in seen or d < 0:
            return
        seen.add(id(v))
        t = type(v)
        if issubclass(t, torch.Tensor):
            out.append((weakref.ref(v), where))
        elif t in (dict, list, tuple, set):
            items = v.items() if t is dict else enumerate(v)
            for k, x in list(items):
                visit(x, f"{where}[{k!r}]", d - 1)
        elif str(t.__module__).startswith("torch.distributed.pipelining") \
                and not issubclass(t, (*roots, enum.Enum)) and hasattr(v, "__dict__"):
            if t is _RecvInfo:        # a stage's own, made when its receive buffers are
                out.append((weakref.ref(v), where))
            for k, x in list(vars(v).items()):
                visit(x, f"{where}.{k}", d - 1)

    for o in objs:
        for k, x in list(vars(o).items()):
            visit(x, f"{type(o).__name__}.{k}", depth)
    return out


def still_alive(held: list[tuple[Any, str]]) -> list[str]:
    """Where each object of ``held`` (:func:`held_by`) still alive after a garbage collection
    was held."""
    gc.collect()
    return [where for r, where in held if r() is not None]
