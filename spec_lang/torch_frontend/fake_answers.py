"""What the fake world cannot answer: a collective on a real tensor, a store of the train file's
own (adversarial rounds 35a / 35d: R35a-1, R35d-3, R35d-6; R35d-4's record).

The capture runs the train file's code in a one-process fake world (:mod:`world`) whose process
group is torch's C++ ``FakeProcessGroup``: a collective returns at once and leaves its tensors
as they are. On the step's fake or meta tensors that is fine, only the graph is kept. On a
*real* tensor (``torch.ones(1)`` made in ``parallelize``, or in a thread, whose trace modes are
thread-local) the "result" is a value the real run would not have, and the train file can read
it (``.item()``) and act on it: r35a_01 / r35a_08 (a thread in the step), r35d_08
(``parallelize``, the number kept in a global) set the learning rate to 0.1 in the capture and
0.2 in the real run (EQUIVALENT for a wrong plan). A ``TCPStore`` client of the train file's own
(r35d_11) fails in the capture (no ``MASTER_ADDR``) and the caught error took the spec's branch.

So, in the capture child (:func:`install`, before the dispatcher's snapshot is taken):

* every ``c10d`` collective operator (``c10d::allreduce_``, ``allgather_``, ``broadcast_``,
  ``send`` / ``recv_``, the coalesced ones: :data:`COLLECTIVE_OPS`) gets a kernel of its own
  at the dispatch keys of real tensors (``CPU``, ``CUDA``, ``PrivateUse1``, ``SparseCPU``,
  ``SparseCUDA``): meta and fake tensors take the ``Meta`` kernel or the fake mode and never
  reach them; a real tensor's collective raises there and, while the capture runs the train
  file's code (any phase, any thread: ``thread_guard.ACTIVE``, or the import of the train
  file: :func:`importing`), is recorded and refused when the capture ends even if the error
  was caught. ``dist.all_reduce``, ``pg.allreduce``, functional collectives
  (``funcol.all_reduce``, a ``DTensor``'s) and ``all_gather_object`` all reach these operators.
  A barrier (``barrier``, ``monitored_barrier_``) has no value and is left alone; but
  ``dist.monitored_barrier`` (and ``ProcessGroup`` / ``Backend.monitored_barrier``) raises on
  every backend but gloo, the fake one too, so a call in the train file's code is refused
  (R36c-3: the error caught, the step took another branch in the capture only).

At import (pass-throughs outside the train file's code):

* the collective methods of ``Backend`` and its subclasses (``FakeProcessGroup``,
  ``ProcessGroupGloo``: ``pg._get_backend(dev).allreduce([t])`` calls the backend directly,
  past the dispatcher, so the capture neither records it nor can answer it) are refused while
  the train file's code runs, whatever the tensors;
* ``TCPStore`` / ``FileStore`` / ``HashStore`` made, and torch's rendezvous handlers
  (``dist.rendezvous``, ``init_process_group(init_method=...)``) called while the train file's
  code runs are refused (R35d-6). A ``PrefixStore`` over the world's store (torch's own
  ``new_group`` makes them) is allowed: every call of it reaches ``world.WorldStore``, which
  records it; a ``PrefixStore`` over another store is refused. Every ``PrefixStore`` made is
  logged (:func:`prefix_log`): :mod:`new_groups` checks that a group's rendezvous store is
  the ``"<group name>/"`` prefix of the world's store (R35d-4).

Not reached (``docs/torch.md``): a train file that holds the originals these wrappers keep
(their closures: the R29-4 family), raw sockets or files it shares with other ranks.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed  # noqa: F401 -- the c10d operators and classes
from torch._C import _distributed_c10d as _c10d

__all__ = ["COLLECTIVE_OPS", "install", "installed", "importing", "note", "prefix_log",
           "REAL_MESSAGE"]

COLLECTIVE_OPS = ("allreduce_", "allreduce_coalesced_", "allgather_", "_allgather_base_",
                  "allgather_coalesced_", "allgather_into_tensor_coalesced_", "reduce_scatter_",
                  "_reduce_scatter_base_", "reduce_scatter_tensor_coalesced_", "broadcast_",
                  "reduce_", "gather_", "scatter_", "alltoall_", "alltoall_base_", "send",
                  "recv_", "recv_any_source_")
_REAL_KEYS = ("CPU", "CUDA", "PrivateUse1", "SparseCPU", "SparseCUDA")
_BACKEND_METHODS = ("allreduce", "allreduce_coalesced", "allgather", "_allgather_base",
                    "allgather_coalesced", "allgather_into_tensor_coalesced", "reduce_scatter",
                    "_reduce_scatter_base", "reduce_scatter_tensor_coalesced", "broadcast",
                    "reduce", "gather", "scatter", "alltoall", "alltoall_base", "send", "recv",
                    "recv_anysource")
REAL_MESSAGE = ("a collective on a tensor that is not the step's: the fake process group cannot "
                "give its real result")
_IMPORTING: list[Any] = [None]     # the recorder of the train file's import (the worker)
_LIBRARY: list[Any] = []           # the torch.library holding the kernels (kept alive)
_PREFIXES: list[tuple[Any, str, Any]] = []     # (PrefixStore, prefix, its store) made


class _Recorder:
    """The train file's import: what :func:`note` records before the capture runs."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.found: list[str] = []


def _raise(msg: str | None, otherwise: str) -> None:
    """Raise the recorded message as a ``PlanError`` (one line when uncaught), or ``otherwise``
    as a ``RuntimeError`` outside the train file's code."""
    from spec_lang.errors import PlanError

    if msg is not None:
        raise PlanError(msg)
    raise RuntimeError(otherwise)


def _recorder() -> Any:
    from spec_lang.torch_frontend import thread_guard

    return thread_guard.ACTIVE[0] or _IMPORTING[0]


_FROM_RANKS = ("in the real run the value comes from the other ranks, in the capture from "
               "nothing, and code that reads it takes another branch")


def note(what: str, why: str = _FROM_RANKS) -> str | None:
    """Record ``"<train file>:<line>: <what>; refused even if the error is caught (...): <why>"``
    in the running capture's guard (refused when it ends, even if the train file caught the
    error) and return it; None (nothing recorded) outside the train file's code."""
    from spec_lang.torch_frontend import thread_guard

    g = _recorder()
    if g is None:
        return None
    msg = (f"{g.path}:{thread_guard.user_line(g.path)}: {what}; refused even if the error is "
           f"caught (R35a-1, R35d-3, R35d-6): {why}")
    g.found.append(msg)
    return msg


@contextlib.contextmanager
def importing(path: str) -> Iterator[None]:
    """Within the block (the worker's import of the train file), record as in the capture;
    refuse at the end what was recorded.

    Raises:
        PlanError: the train file made a store or ran a collective when imported.
    """
    from spec_lang.errors import PlanError

    from spec_lang.torch_frontend.thread_guard import PROCESS_RAN, children_now

    rec = _IMPORTING[0] = _Recorder(path)
    kids = children_now()
    try:
        yield
    finally:
        _IMPORTING[0] = None
    now = children_now()
    if kids is not None and now != kids:        # a program run at import (R37a-3)
        rec.found.append(f"{path}:1: " + PROCESS_RAN.format(
            when="when the train file was imported"))
    if rec.found:
        raise PlanError(rec.found[0])


def _refusing_kernel(name: str) -> Any:
    def kernel(*a: Any, **k: Any) -> Any:  # noqa: ARG001
        what = f"{REAL_MESSAGE} (c10d::{name} on a real tensor)"
        _raise(note(what), f"{what} (the capture's fake world)")
    kernel.__name__ = f"refused_{name}"
    return kernel


def install() -> None:
    """Register the refusing kernels of :data:`COLLECTIVE_OPS` (idempotent). The capture child
    calls it before the dispatcher's snapshot (:mod:`dispatcher_guard`), which then holds them
    as torch's; never in a process that runs real collectives."""
    if _LIBRARY:
        return
    lib = torch.library.Library("c10d", "IMPL")  # noqa: TOR901 -- the capture child's own
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # "Overriding a previously registered kernel"
        for name in COLLECTIVE_OPS:
            text = torch._C._dispatch_dump(f"c10d::{name}")  # noqa: SLF001
            for key in _REAL_KEYS:
                if f"\n{key}: registered at" in text:
                    lib.impl(name, _refusing_kernel(name), key)
    _LIBRARY.append(lib)


@contextlib.contextmanager
def installed() -> Iterator[None]:
    """:func:`install` for the time of a ``with`` block, then torch's kernels again (tests)."""
    was = bool(_LIBRARY)
    install()
    try:
        yield
    finally:
        if not was:
            _LIBRARY.pop()._destroy()  # noqa: SLF001


def _refusing_method(cls: type, name: str, original: Any) -> Any:
    def method(*a: Any, **k: Any) -> Any:
        msg = note(f"a collective called on the process group's backend directly "
                   f"({cls.__name__}.{name}): it bypasses torch's dispatcher, so the capture "
                   "neither records it nor can give its real result on a tensor that is not "
                   "the step's")
        if msg is not None:
            _raise(msg, "")
        return original(*a, **k)
    method.__name__ = name
    return method


_BY_BACKEND = ("code that catches the error takes a branch the capture cannot tell from the "
               "real run's")


def _monitored_barrier(label: str, original: Any) -> Any:
    def barrier(*a: Any, **k: Any) -> Any:
        msg = note(f"{label}: gloo runs it, nccl and the capture's fake backend raise "
                   "(use dist.barrier: a barrier has no value to check)", _BY_BACKEND)
        if msg is not None:
            _raise(msg, "")
        return original(*a, **k)
    barrier.__name__ = "monitored_barrier"
    barrier.__wrapped__ = original           # type: ignore[attr-defined]
    return barrier


def _store_init(cls: type, original: Any) -> Any:
    def __init__(self: Any, *a: Any, **k: Any) -> None:  # noqa: N807
        msg = note(f"the train file makes its own key-value store ({cls.__name__}): the "
                   "capture's fake world has no other ranks to meet there")
        if msg is not None:
            _raise(msg, "")
        original(self, *a, **k)
    return __init__


def _world_store(store: Any) -> bool:
    from spec_lang.torch_frontend.world import WorldStore

    seen = 0
    while store is not None and seen < 64:
        if isinstance(store, WorldStore):
            return True
        rec = next((r for r in _PREFIXES if r[0] is store), None)
        store, seen = (rec[2] if rec is not None else None), seen + 1
    return False


def _prefix_init(original: Any) -> Any:
    def __init__(self: Any, *a: Any, **k: Any) -> None:  # noqa: N807
        names = ("prefix", "store")
        args = dict(zip(names, a)) | {n: k[n] for n in names if n in k}
        if not _world_store(args.get("store")):
            msg = note("the train file makes its own key-value store (a PrefixStore over a "
                       "store that is not the process group's): the capture's fake world has "
                       "no other ranks to meet there")
            if msg is not None:
                _raise(msg, "")
        original(self, *a, **k)
        _PREFIXES.append((self, str(args.get("prefix")), args.get("store")))
    return __init__


def prefix_log() -> list[tuple[Any, str, Any]]:
    """Every ``PrefixStore`` made through torch's class since :func:`clear_prefixes`:
    ``(store, prefix, the store it prefixes)``, in order (:mod:`new_groups`, R35d-4)."""
    return _PREFIXES


def clear_prefixes() -> None:
    """Forget the ``PrefixStore`` objects made (a new fake world)."""
    _PREFIXES.clear()


def _rendezvous(scheme: str, original: Any) -> Any:
    def handler(*a: Any, **k: Any) -> Any:
        msg = note(f"the train file runs a rendezvous ({scheme}://: dist.rendezvous or "
                   "init_process_group with an init_method): the capture's fake world has no "
                   "other ranks to meet")
        if msg is not None:
            _raise(msg, "")
        return original(*a, **k)
    return handler


def _wrap_classes() -> None:
    for cls in [c for c in vars(_c10d).values()
                if isinstance(c, type) and issubclass(c, _c10d.Backend)]:
        for name in _BACKEND_METHODS:
            if name in vars(cls):
                setattr(cls, name, _refusing_method(cls, name, vars(cls)[name]))
    # monitored_barrier: gloo's only, a ValueError on the fake backend (R36c-3); a barrier
    # has no value, dropping it changes nothing computed: use dist.barrier
    for cls in (_c10d.ProcessGroup, _c10d.Backend):
        if "monitored_barrier" in vars(cls):
            cls.monitored_barrier = _monitored_barrier(f"{cls.__name__}.monitored_barrier",
                                                       vars(cls)["monitored_barrier"])
    c10d = sys.modules["torch.distributed.distributed_c10d"]
    mb = vars(c10d)["monitored_barrier"]
    wrapped = _monitored_barrier("dist.monitored_barrier", mb)
    for m in (c10d, sys.modules["torch.distributed"]):
        if vars(m).get("monitored_barrier") is mb:
            m.monitored_barrier = wrapped
    for cls in (_c10d.TCPStore, _c10d.FileStore, _c10d.HashStore):
        cls.__init__ = _store_init(cls, vars(cls)["__init__"])
    _c10d.PrefixStore.__init__ = _prefix_init(vars(_c10d.PrefixStore)["__init__"])
    rdzv = sys.modules["torch.distributed.rendezvous"]
    handlers = vars(rdzv)["_rendezvous_handlers"]
    for scheme, h in list(handlers.items()):
        handlers[scheme] = _rendezvous(scheme, h)


_wrap_classes()
