"""References to the parameters and buffers the traced step replaced, wherever Python holds
them (adversarial round 44c, R44c-5; round 45a, R45a-3).

The capture (:mod:`spec_lang.torch_frontend.capture`) traces each step on fresh parameters and
buffers put into the model in place of the objects it held. A reference to one of those
objects kept elsewhere (``self.refs = [self.w2.weight]``, ``math.REFS``, ``builtins``, a module
object put into ``sys.modules``, a view of the parameter) is then neither side's parameter: an
identity test against it, or a value read through it, takes the same branch in the spec and in
every rank, where the real runs differ (FSDP2 replaces the parameter object at ``fully_shard``,
the single-device model does not). The step-state fingerprint
(:func:`step_state.step_state`, ``stale``) refuses the references it reads (module attributes,
the train file's globals, closures, the optimizer); round 45a found them in the places it reads
only by name (another module's globals, ``builtins``, ``sys.modules``) and behind a view's
``_base``. :func:`refuse_held` asks Python's collector instead: it follows the holders of
each replaced tensor (and of its views) upwards, and a chain that reaches a module's globals
or a suspended frame is refused; chains through the capture's own objects and running frames
are not followed.
"""

from __future__ import annotations

import gc
import os
import sys
import types
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from spec_lang.errors import PlanError
from spec_lang.torch_frontend.value_text import key_text

__all__ = ["refuse_held"]


_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
_OURS = tuple(os.path.join(_ROOT, d) + os.sep for d in ("spec_lang", "proofs", "rewriting"))
_MAX_SEEN = 50_000      # objects visited before the search gives up (then: refused)


def refuse_held(replaced: Sequence[tuple[str, Any]], ours: Iterable[Any], site: str,
                collect: bool = True) -> None:
    """Refuse a reference to any of ``replaced`` ((name, the tensor the model held before the
    capture replaced it)), or to a view of one, that Python code can reach from a module's
    globals (another package's, ``builtins``, a module object put into ``sys.modules``), from
    a suspended frame (a generator) or from a holder Python's collector does not see.

    The holders are searched upwards with the collector (``gc.get_referrers``) from the
    tensors. A chain that ends in ``ours`` (the capture's own containers), in what a frame
    running now holds (the capture's calls) or in a module of shardproof's own is the
    capture's; the model's and the optimizer's attributes and the train file's globals are
    the step-state fingerprint's to refuse (:func:`step_state.step_state`). Round 45b
    (R45b-1) hid the reference where the collector does not look: a numpy object array, a
    frozen generation (``gc.freeze``), a context variable, the codec registry, a signal
    handler. So a tensor must hold no more references (``sys.getrefcount``) than its
    referrers account for, and a holder met on the way must have a referrer or be held by a
    running frame (the caller clears its own loop variables that held the tensors).

    ``collect``: collect the garbage first (False: the caller just did, ``step_state``'s
    collection before the step; a full collection costs a capture child ~0.18 CPU s). Garbage
    left (what a finalizer run by that collection made) can only add a refusal, never hide a
    holder: a chain through garbage reaches no module, and its cycles account for their
    references.

    Raises:
        PlanError: naming the tensor and what holds it, at ``site``; also when the search
            visits over :data:`_MAX_SEEN` objects without an answer.
    """
    targets = {id(t): n for n, t in replaced}
    if not targets:
        return
    if collect:         # garbage is no holder (a dead frame's cycle: a long, useless chain)
        gc.collect()
    if gc.get_freeze_count():
        raise PlanError(_message(site, next(iter(targets.values())), _HIDDEN + " (gc.freeze "
                                 "moved objects where the collector does not search)"))
    views = [o for o in gc.get_objects() if isinstance(o, torch.Tensor)
             and id(getattr(o, "_base", None)) in targets]
    for v in views:     # ``p.view(-1)`` kept in build_model: its ``_base`` (R45a-3)
        targets[id(v)] = f"{targets[id(v._base)]} (a view of it)"
    v = None
    tensors = [t for _, t in replaced] + views
    hidden = _unaccounted(tensors)      # before any frame's f_locals is made (R45b-1)
    if hidden is not None:
        raise PlanError(_message(site, targets[id(hidden)], _HIDDEN))
    modules = [(key_text(name), m) for name, m in list(dict.items(sys.modules))
               if isinstance(m, types.ModuleType)]
    shardproof = [_ours(m) for _, m in modules]     # (a realpath each: once)
    roots = {id(vars(m)): name for (name, m), o in zip(modules, shardproof) if not o}
    import builtins  # noqa: PLC0415

    roots[id(vars(builtins))] = "builtins"
    stop = {id(x) for x in ours} | {id(x) for x in replaced} | {id(replaced)}
    stop |= {id(vars(m)) for (_, m), o in zip(modules, shardproof) if o}
    f: Any = sys._getframe()  # noqa: SLF001
    while f is not None:        # running frames, their locals and what those hold: ours
        loc = f.f_locals
        stop |= {id(f), id(loc)} | {id(x) for x in loc.values()}
        f = f.f_back
    loc = None
    frontier: list[Any] = list(tensors)
    visited: list[Any] = []         # every holder the search met (not the tensors)
    origin = dict(targets)          # id of a holder -> the tensor it leads to
    seen = set(origin)
    stop |= {id(x) for x in (frontier, views, seen, origin, targets, roots, stop, tensors,
                             visited)}
    stop -= {id(t) for t in tensors}
    while frontier:
        fids = {id(x) for x in frontier}
        held: set[int] = set()
        found: list[Any] = []
        stop.add(id(found))
        refs = gc.get_referrers(*frontier)
        stop.add(id(refs))
        books = {id(frontier), id(found), id(refs), id(tensors), id(views), id(visited)}
        for r in refs:
            mine = [id(x) for x in gc.get_referents(r) if id(x) in fids]
            if id(r) not in books:
                held.update(mine)
            if not mine or id(r) in seen or id(r) in stop:
                continue
            seen.add(id(r))
            src = origin[mine[0]]
            origin[id(r)] = src
            where = roots.get(id(r))
            if where is None and type(r).__name__ == "frame":
                where = f"a suspended frame of {r.f_code.co_name} ({r.f_code.co_filename})"
            if where is None and _finalizer(r):     # it can hand the tensor on when it is
                where = f"a {type(r).__qualname__} object with a __del__ method (garbage " \
                        "whose finalizer can hand it to the step, R58d-4)"    # collected
            if where is not None:
                raise PlanError(_message(site, src, where))
            found.append(r)
        del refs
        lost = [k for k in fids if k not in held and k not in stop]
        if lost:    # a holder nothing visible holds (R45b-1: the codec registry)
            raise PlanError(_message(site, origin[lost[0]], _HIDDEN))
        if len(seen) > _MAX_SEEN:
            raise PlanError(_message(site, next(iter(targets.values())),
                                     "objects too many to search"))
        visited += found
        frontier = found
    r = None
    hidden = _unaccounted(visited)  # a holder held where the collector does not look, also
    if hidden is not None:          # one in a cycle (round 45c, R45c-1: a signal handler
        raise PlanError(_message(site, origin[id(hidden)], _HIDDEN))   # holding itself)


_HIDDEN = ("a holder Python's collector does not see (a C extension's container such as a "
           "numpy object array, an interpreter registry, a context variable, a signal "
           "handler)")


def _unaccounted(objs: list[Any]) -> Any | None:
    """The first of ``objs`` holding more references (``sys.getrefcount``) than its
    referrers the collector sees, or None (round 45b, R45b-1). No running frame may hold
    one in a local but ``objs`` itself (the caller's)."""
    counts = dict.fromkeys((id(o) for o in objs), 0)
    for ref in gc.get_referrers(*objs):
        for x in gc.get_referents(ref):
            if id(x) in counts:
                counts[id(x)] += 1
    ref = x = None
    for o in objs:      # (the argument and ``o``; ``objs`` is a referrer counted above)
        if sys.getrefcount(o) - 2 > counts[id(o)]:
            return o
    return None


def _finalizer(o: Any) -> bool:
    """``o``'s class (or a base) defines ``__del__`` in its own namespace (read through
    ``type``'s descriptors: no code of ``o``'s runs). A holder with one can be garbage that
    the collector keeps renewing: each collection runs its ``__del__``, which may build the
    next holder, and a step that collects gets the tensor back (R58d-4)."""
    for c in type.__dict__["__mro__"].__get__(type(o)):
        if "__del__" in type.__dict__["__dict__"].__get__(c):
            return True
    return False


def _ours(m: types.ModuleType) -> bool:
    """``m`` is one of shardproof's own modules (by its file, not its name: a train file
    may sit next to a module of its own called ``proofs``)."""
    f = getattr(m, "__file__", None)
    return isinstance(f, str) and os.path.realpath(f).startswith(_OURS)


def _message(site: str, name: str, where: str) -> str:
    where = where if where.startswith(("a ", "objects", "builtins")) else \
        f"the globals of the module {where}"
    return (f"{site}: the {name} object the model had before the step is reachable from "
            f"{where}: prove --torch traces the step on fresh parameters and buffers, so an "
            "identity test against such a reference, or a value read through it, is not "
            "what the real step sees (R44c-5, R45a-3); look parameters up through their "
            "module (self.w2.weight) or model.named_parameters() when you need them")
