"""No other thread or process while the train file's code is captured (adversarial round 34b,
R34b-2, the thread half).

The capture traces with ``make_fx``, whose proxy and fake modes are *thread-local*: in another
Python thread the fake tensors run their fake kernels and nothing is recorded. r34b_11 runs a
second ``dist.all_reduce`` of every gradient in a ``threading.Thread`` started and joined in
the step: the real run sums the gradients twice (truth w1 0.0070, w2 0.0093), the trace holds
one all-reduce, and the plan was EQUIVALENT. ``concurrent.futures``' thread pools (and
``multiprocessing``'s pool handlers) are threads too; ``asyncio`` runs in the same thread and
is traced like any call. A process (``multiprocessing.Process``, ``os.fork``) runs the
train file's code where no tracer is at all (a forked copy of the fake world: its collectives
return at once and leave no node), so it is refused the same way.

So while the capture runs the train file's code (``build_model``, ``make_batch``,
``parallelize``, the optimizer probe and the traced step: all of :func:`capture`,
:func:`threads_refused`):

* the functions that start a thread or a process are wrapped (``threading.Thread.start``,
  ``threading``'s ``_start_new_thread`` / ``_start_joinable_thread``, ``_thread``'s
  ``start_new_thread`` / ``start_new`` / ``start_joinable_thread``,
  ``multiprocessing``'s ``BaseProcess.start``, ``os.fork`` / ``os.forkpty``, and what starts a
  program: ``subprocess.Popen`` (``run``, ``check_output``, ``os.popen``), ``_posixsubprocess.
  fork_exec``, ``os.posix_spawn`` / ``posix_spawnp``, ``os.system``, ``os.execv`` / ``execve``:
  R36c-2, a ``TCPStore`` client in ``python -c`` read the launcher's store): a call raises
  and is recorded (refused at the end even if the train file caught the error);
* a train file can hold the original functions (taken when imported), so threads are also
  *counted*: the Python threads alive (``sys._current_frames()``, ``threading.enumerate()``,
  ``_thread._count()``) at the start must be the ones alive before the train file was
  imported (:func:`take_threads`, by the capture child), and the same threads must be alive
  at every node the tracer records (:func:`watched`) and at the end. A thread started from a
  held reference *and* joined between two recorded nodes is not seen by the count; it needs a
  reference taken at import, which the wrappers cannot reach (noted in ATTEMPTS.md).

Adversarial round 34d showed that gap: a thread made with a starter held from import (R34d-1),
with libc's ``pthread_create`` through ctypes or with a fresh ``_thread`` module from
``_imp.create_builtin`` (R34d-2) ran a second all-reduce of every gradient and was joined
between two recorded nodes (EQUIVALENT for a wrong plan). Sampling thread sets cannot see a
thread that lives between two samples, so the traced step now also checks *where the work
lands* (:func:`watched`): every op on the step's fake tensors, from any thread, is dispatched
by the trace's ``FakeTensorMode`` (a ``FakeTensor`` enters its own mode in whatever thread it
is used), and that mode's ``dispatch`` refuses a call from a thread other than the tracing one
(``threading.get_ident()``: a ctypes thread running Python has its own). A collective of
another thread on a gradient or parameter, and an in-place update of one, are refused so.

R34d-3 (a false refusal): ``build_model`` and ``make_batch`` may use threads (a thread pool for
pure-Python data prep): their results are plain inputs. :func:`threads_let` gives them the
thread starters back and requires every thread they started to have ended when they return
(processes stay refused).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _thread

from spec_lang.torch_frontend.own_guards import capture_own, check_guard

__all__ = ["value_hint", "take_threads", "threads_now", "threads_refused", "threads_let", "watched",
           "ACTIVE"]

_BASE: list[Any] = [None]
# the guard running now (None outside the capture): read by :func:`watched`
ACTIVE: list[Any] = [None]


def value_hint(e: BaseException) -> str:
    """What to do next when the capture failed because the step asked for a value of its fake
    tensors (``print(f"{loss.item():.4f}")``, ``"%.4f" % loss.item()``, ``float(t)``: R35d-5,
    R35e-2), appended to the one-line error; ``""`` for any other error. Logging the returned
    loss is the fix: giving the step a stand-in value would let it take a branch the real run
    does not (R35e-1)."""
    text = f"{type(e).__name__}: {e}"
    if ("DataDependent" in type(e).__name__ or "data-dependent" in text
            or "SymFloat.__format__" in text or "SymInt.__format__" in text):
        return (" -- the step reads a tensor's value (.item(), float(t), a format of it), "
                "which the capture does not have: it proves the step for every input. To log "
                "the loss, return it from train_step and log it after the step returns")
    return ""


def threads_now() -> tuple[frozenset[int], int]:
    """The idents of the Python threads alive now (with a frame, or known to ``threading``)
    and ``_thread``'s count of the threads it started that still run."""
    ids = set(sys._current_frames()) | {t.ident for t in threading.enumerate()}  # noqa: SLF001
    return frozenset(i for i in ids if i is not None), _thread._count()  # noqa: SLF001


def take_threads() -> None:
    """Record the threads alive before the train file is imported (the capture child)."""
    _BASE[0] = threads_now()


def user_line(path: str) -> int:
    """The innermost line of the train file on the calling thread's stack (1 when none)."""
    want = Path(path).resolve()
    f = sys._getframe(1)  # noqa: SLF001
    while f is not None:
        try:
            if Path(f.f_code.co_filename).resolve() == want:
                return f.f_lineno
        except (OSError, ValueError):
            pass
        f = f.f_back
    return 1


def _message(path: str, line: int, what: str) -> str:
    return (f"{path}:{line}: {what} while the capture runs the train file's code: make_fx "
            "records only the thread that traces (its modes are thread-local), so what another "
            "thread or process runs (a collective, an update) is never seen (R34b-2): do the "
            "work in the step's own thread, without threads, thread pools or processes")


class _Guard:
    def __init__(self, path: str) -> None:
        self.path = path
        self.found: list[str] = []
        self.at = threads_now()
        self.kids = children_now()
        self.saved: list[tuple[Any, str, Any]] = []     # the starters as they were

    def note(self, line: int, what: str, thread: bool = True) -> str:
        """Record a refusal (raised when the capture ends, even if the step caught the error);
        ``thread=False`` for one that is not about threads (a store, a value read)."""
        msg = _message(self.path, line, what) if thread else f"{self.path}:{line}: {what}"
        self.found.append(msg)
        return msg

    def check(self, when: str) -> None:
        """A thread alive now that was not at the start, or more threads than then. A thread of
        the start that ended is no finding: those are the harness's (the start holds no thread
        the train file started, :func:`threads_refused`), and one may end at any time (the
        suite's own threads made this check fail at random)."""
        if self.found:
            return
        now = threads_now()
        if not now[0] <= self.at[0] or now[1] > self.at[1]:
            self.note(user_line(self.path) if when == "at a recorded op" else 1,
                      f"another thread ran {when} (threads {sorted(self.at[0])} / "
                      f"{self.at[1]} at the start, {sorted(now[0])} / {now[1]} now)")


def children_now() -> tuple | None:
    """This process's children: the counters the kernel adds a child's to when it is reaped
    (``/proc/self/stat``: cminflt, cmajflt, cutime, cstime) and the pids of those not reaped yet
    (``/proc/self/task/*/children``); None where ``/proc`` cannot be read. Any program that ran
    changes it, however it was started (R37a-1: ``posix.system``, libc's ``system()`` through
    ``ctypes``: no Python function a wrapper could reach)."""
    try:
        stat = Path("/proc/self/stat").read_text()
        f = stat[stat.rindex(")") + 2:].split()
        reaped = (int(f[8]), int(f[10]), int(f[13]), int(f[14]))
    except (OSError, ValueError, IndexError):
        return None
    kids: set[str] = set()
    try:
        for t in Path("/proc/self/task").iterdir():
            kids |= set((t / "children").read_text().split())
    except OSError:
        pass
    return reaped, frozenset(kids)


PROCESS_RAN = ("a process ran {when} (the kernel's count of this process's children changed, "
               "R37a-1): it runs where no tracer is, and what it computes or reads (the "
               "launcher's store, another rank) is not seen: start no program or process in "
               "the train file")
WHILE_CAPTURED = "while the capture ran the train file's code"


def _starters() -> list[tuple[Any, str, str]]:
    """``(owner, attribute, label)`` of every function that starts a thread or a process."""
    import multiprocessing.process as mp
    import os
    import subprocess

    import _posixsubprocess

    out = [(threading.Thread, "start", "threading.Thread.start")]
    out += [(threading, n, f"threading.{n}") for n in ("_start_new_thread",
                                                       "_start_joinable_thread")
            if hasattr(threading, n)]
    out += [(_thread, n, f"_thread.{n}") for n in ("start_new_thread", "start_new",
                                                   "start_joinable_thread")
            if hasattr(_thread, n)]
    out += [(mp.BaseProcess, "start", "multiprocessing's Process.start")]
    out += [(os, n, f"os.{n}") for n in ("fork", "forkpty") if hasattr(os, n)]
    # a program started (R36c-2: a TCPStore client in `python -c` read the launcher's store):
    # subprocess (Popen, run, check_output, os.popen) through its class and the fork_exec it
    # holds, posix_spawn, os.system and the exec family
    out += [(subprocess.Popen, "_execute_child", "subprocess.Popen")]
    out += [(m, n, f"{m.__name__}.{n}") for m, n in (
        (subprocess, "_fork_exec"), (_posixsubprocess, "fork_exec"), (os, "posix_spawn"),
        (os, "posix_spawnp"), (os, "system"), (os, "execv"), (os, "execve"))
        if vars(m).get(n) is not None]
    return out


@contextlib.contextmanager
def threads_refused(path: str) -> Iterator[_Guard]:
    """Within the block (the capture of ``path``), refuse a thread or process started, and a
    thread alive at the start that was not before the train file was imported, or a change of
    the threads alive at a recorded node (:func:`watched`) or at the end.

    Raises:
        PlanError: with the train file's line where the thread was started (1 when unknown).
    """
    from spec_lang.errors import PlanError

    g = _Guard(path)
    base = _BASE[0]
    if base is not None and not g.at[0] <= base[0]:
        raise PlanError(_message(path, 1, f"threads started when the train file was imported "
                                 f"run ({len(g.at[0] - base[0])} more than before it)"))
    saved = g.saved = [(o, n, vars(o)[n]) for o, n, _ in _starters()]

    def refusing(label: str) -> Any:
        def start(*a: Any, **k: Any) -> Any:  # noqa: ARG001
            raise PlanError(g.note(user_line(path), f"the train file starts a thread or a "
                                   f"process ({label})"))
        return start

    for o, n, label in _starters():
        setattr(o, n, refusing(label))
    ACTIVE[0], outer = g, ACTIVE[0]
    try:
        yield g
        g.check("during the capture")
        kids = children_now()
        if not g.found and g.kids is not None and kids != g.kids:
            g.note(1, PROCESS_RAN.format(when=WHILE_CAPTURED), thread=False)
    finally:
        for o, n, f in saved:
            setattr(o, n, f)
        ACTIVE[0] = outer
    if g.found:
        raise PlanError(g.found[0])


@contextlib.contextmanager
def threads_let(path: str) -> Iterator[None]:
    """Within the block (``build_model``, ``make_batch``), the thread starters are the originals
    (R34d-3: a thread pool for data prep); when it ends, every thread started in it must have
    ended (the threads alive, and ``_thread._count()``, as at the start of the capture). A
    process (``multiprocessing``, ``os.fork``) stays refused: a child runs the rest of the
    capture's code.

    Raises:
        PlanError: a thread the block started still runs.
    """
    from spec_lang.errors import PlanError

    g = ACTIVE[0]
    if g is None:
        yield
        return
    threads = {(id(o), n) for o, n, label in _starters() if "thread" in label.lower()}
    refusing = [(o, n, vars(o)[n]) for o, n, _ in g.saved]
    for o, n, f in g.saved:
        if (id(o), n) in threads:
            setattr(o, n, f)
    try:
        yield
    finally:
        for o, n, f in refusing:
            setattr(o, n, f)
    now = threads_now()
    if not now[0] <= g.at[0] or now[1] > g.at[1]:
        raise PlanError(g.note(1, "a thread started in build_model or make_batch still runs when "
                               f"it returned (threads {sorted(g.at[0])} / {g.at[1]} at the "
                               f"start, {sorted(now[0])} / {now[1]} now): join every thread "
                               "(leave the pool's ``with`` block) before returning"))


def _unknowable() -> tuple[type, ...]:
    from torch._subclasses.fake_tensor import (
        DataDependentOutputException, DynamicOutputShapeException, UnsupportedOperatorException,
    )
    return (DataDependentOutputException, DynamicOutputShapeException,
            UnsupportedOperatorException)



def _fake_mode() -> Any:
    import torch

    return torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE)  # noqa: SLF001


@contextlib.contextmanager
def one_thread(g: _Guard) -> Iterator[None]:
    """Within the block (the traced step, inside ``make_fx``), the trace's ``FakeTensorMode``
    refuses an op dispatched from another thread than this one (R34d-1, R34d-2): the op is
    recorded (refused at the end even if caught) and raises in that thread. An op that raises
    only because its tensors are fake (a data-dependent value: ``.item()``, ``bool()``) is
    recorded and refused when the step returns (R35a-3: ``try: n = t.item() except: n = 1``
    took the single-device branch in the capture only); uncaught, it ends the capture as
    before."""
    from spec_lang.errors import PlanError

    mode, me, unknowable = _fake_mode(), threading.get_ident(), _unknowable()
    if mode is None:
        yield
        return
    had = "dispatch" in vars(mode)
    before = mode.dispatch

    def dispatch(func: Any, *a: Any, **k: Any) -> Any:
        if threading.get_ident() != me:
            raise PlanError(g.note(user_line(g.path), f"another thread than the step's ran "
                                   f"{func} on the step's tensors (R34d-1 / R34d-2)"))
        try:
            return before(func, *a, **k)
        except unknowable as e:
            # raised only because the tensor is fake: a step that catches it takes a branch
            # the real run does not (R35a-3); refused at the end if the step goes on
            g.note(user_line(g.path), f"{func} raised {type(e).__name__} on the step's fake "
                   "tensors (a value the capture cannot know: .item(), bool(), .tolist(), "
                   "nonzero); a step that catches it takes another branch than the real run "
                   "(R35a-3): compute the value without a try/except around it", thread=False)
            raise

    # a Python number of a fake tensor (``float(t.item())``, ``bool(t)``) is an unbacked symbol
    # in ``tracing_mode="fake"``: guarding on it raises from the shape env, not from dispatch
    env = getattr(mode, "shape_env", None)
    env_had = env is not None and "_make_data_dependent_error" in vars(env)
    make_error = getattr(env, "_make_data_dependent_error", None)

    def data_dependent(*a: Any, **k: Any) -> Any:
        g.note(user_line(g.path), "a Python value of the step's fake tensors was asked for (a "
               "data-dependent branch or number: float(t.item()), bool(t), int(t)); a step "
               "that catches the error takes another branch than the real run (R35a-3): "
               "compute the value without a try/except around it; to log the loss (logging "
               "swallows the error), return it from train_step and log it after the step",
               thread=False)
        return make_error(*a, **k)

    mode.dispatch = capture_own(dispatch)
    if make_error is not None:
        env._make_data_dependent_error = data_dependent  # noqa: SLF001
    try:
        # a value read raising on a fake tensor, caught by the step (R35d-2): value_reads
        from spec_lang.torch_frontend.deep_copies import meta_constants
        from spec_lang.torch_frontend.value_reads import refused

        with refused(g), meta_constants(mode, g):      # an EMA copied on meta (R46f-5)
            yield
    finally:
        now = vars(mode).get("dispatch")
        if had:
            mode.dispatch = before
        else:
            vars(mode).pop("dispatch", None)
        if make_error is not None:
            if env_had:
                env._make_data_dependent_error = make_error  # noqa: SLF001
            else:
                vars(env).pop("_make_data_dependent_error", None)
        check_guard(now, dispatch, "dispatch")       # the step left it as it was (R55d-1)


def watched(fn: Any) -> Any:
    """``fn`` (the function ``make_fx`` traces) run with a check, at every node the tracer
    records, that the threads alive are the ones alive when :func:`threads_refused` began
    (the graph's ``create_node``, chained with any hook set before), and with no op on the
    step's tensors from another thread (:func:`one_thread`). Refused at the end of
    :func:`threads_refused` (also when the train file caught an error in between)."""
    def run(*a: Any, **k: Any) -> Any:
        from torch.fx.experimental.proxy_tensor import get_proxy_mode

        from spec_lang.torch_frontend.op_guard import create_node_hook

        g = ACTIVE[0]
        graph = getattr(getattr(get_proxy_mode(), "tracer", None), "graph", None)
        if g is None or graph is None:
            return fn(*a, **k)
        def create_node(create: Any, *ca: Any, **ck: Any) -> Any:
            g.check("at a recorded op")
            return create(*ca, **ck)

        with create_node_hook(graph, create_node), one_thread(g):
            return fn(*a, **k)
    return run
