"""No thread or process while the train file's code is captured (``thread_guard.py``;
adversarial round 34b, R34b-2, the thread half): make_fx's modes are thread-local, so what
another thread runs (r34b_11: a second all-reduce of every gradient) is never recorded.
Seconds; the slow prove of r34b_11 is in ``tests/adversarial/test_round34b.py``.
"""

from __future__ import annotations

import _thread
import concurrent.futures
import multiprocessing
import os
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch.fx.experimental.proxy_tensor import make_fx

from spec_lang.errors import PlanError
from spec_lang.torch_frontend import thread_guard
from spec_lang.torch_frontend.thread_guard import (take_threads, threads_now, threads_refused,
                                                   watched)
from spec_lang.torch_frontend.world import fake_world

HERE = __file__
ROUND34B = Path(__file__).resolve().parents[1] / "adversarial" / "plans" / "round34b"
# a reference held from "import", as a train file can take it: the wrappers do not reach it
HELD_START = _thread.start_new_thread


@pytest.fixture(autouse=True)
def no_thread_left():
    """Wait (up to 10 s) for the threads a test started to end: a test's worker thread still
    ending when the next test's guard takes its thread set made that test fail at random
    under load (``test_a_step_without_threads_is_accepted`` after
    ``test_a_thread_left_running_is_refused_at_the_end``, stop 48)."""
    before = set(sys._current_frames())  # noqa: SLF001
    yield
    deadline = time.monotonic() + 10.0
    while set(sys._current_frames()) - before and time.monotonic() < deadline:  # noqa: SLF001
        time.sleep(0.01)


def test_a_thread_started_is_refused_with_the_line():
    def work():
        pass

    with pytest.raises(PlanError, match=rf"{HERE}:\d+: the train file starts a thread .*"
                       r"threading.Thread.start.*R34b-2"):
        with threads_refused(HERE):
            t = threading.Thread(target=work)
            t.start()
            t.join()


def test_a_refusal_caught_by_the_train_file_is_refused_at_the_end():
    with pytest.raises(PlanError, match=r"starts a thread"):
        with threads_refused(HERE):
            try:
                threading.Thread(target=lambda: None).start()
            except Exception:  # noqa: BLE001 -- the train file swallows the refusal
                pass


def test_thread_pools_and_low_level_starts_are_refused():
    for start in (lambda: concurrent.futures.ThreadPoolExecutor(1).submit(print),
                  lambda: _thread.start_new_thread(print, ()),
                  lambda: threading._start_new_thread(print, ())):  # noqa: SLF001
        with pytest.raises(PlanError, match=r"starts a thread"):
            with threads_refused(HERE):
                start()


def test_processes_are_refused():
    with pytest.raises(PlanError, match=r"multiprocessing's Process.start"):
        with threads_refused(HERE):
            multiprocessing.get_context("fork").Process(target=print).start()
    with pytest.raises(PlanError, match=r"os.fork"):
        with threads_refused(HERE):
            os.fork()


def test_the_starters_are_given_back():
    before = (threading.Thread.start, _thread.start_new_thread, os.fork)
    with pytest.raises(PlanError):
        with threads_refused(HERE):
            threading.Thread(target=lambda: None).start()
    assert (threading.Thread.start, _thread.start_new_thread, os.fork) == before
    assert thread_guard.ACTIVE[0] is None
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join()


def test_a_thread_from_a_held_reference_alive_at_a_recorded_op_is_refused():
    """r34b_11 with ``_thread.start_new_thread`` taken at import: not wrapped, but the thread
    is alive when the tracer records the step's next op."""
    up, go, done = threading.Event(), threading.Event(), threading.Event()

    def work():
        up.set()
        go.wait(10)
        done.set()

    def step(x):
        HELD_START(work, ())
        up.wait(10)
        y = x * 2                       # recorded while the other thread is alive
        go.set()
        done.wait(10)
        return y

    with pytest.raises(PlanError, match=r"another thread ran at a recorded op"):
        with threads_refused(HERE):
            make_fx(watched(step), tracing_mode="fake")(torch.ones(4))


def test_a_thread_started_at_import_and_alive_is_refused():
    stop = threading.Event()
    take_threads()
    t = threading.Thread(target=stop.wait, args=(10,))
    t.start()
    try:
        with pytest.raises(PlanError, match=r"threads started when the train file was imported"):
            with threads_refused(HERE):
                pass
    finally:
        stop.set()
        t.join()
        thread_guard._BASE[0] = None  # noqa: SLF001


def test_a_thread_left_running_is_refused_at_the_end():
    up, stop = threading.Event(), threading.Event()

    def work():
        up.set()
        stop.wait(10)

    try:
        with pytest.raises(PlanError, match=r"another thread ran during the capture"):
            with threads_refused(HERE):
                HELD_START(work, ())
                up.wait(10)
    finally:
        stop.set()


def test_a_step_without_threads_is_accepted():
    before = threads_now()[0]     # threads of earlier tests may still be ending: not compared
    with fake_world({"dp": 2}, {"dp": 0}) as w:
        def step(x):
            dist.all_reduce(x, group=w.mesh["dp"].get_group())
            return x + 1
        with threads_refused(HERE):
            gm = make_fx(watched(step), tracing_mode="fake")(torch.ones(4))
    assert any("allreduce" in str(n.target) for n in gm.graph.nodes), gm.graph
    assert threads_now()[0] <= before      # the step and the capture left no thread running


def test_r34b_11_captured_is_refused_at_its_thread():
    from spec_lang.torch_frontend.capture import capture
    from spec_lang.torch_frontend.contract import read_train_file

    path = ROUND34B / "r34b_11_dp_second_all_reduce_in_thread.py"
    tf = read_train_file(str(path), path.read_bytes())
    line = next(i for i, s in enumerate(path.read_text().splitlines(), 1) if "t.start()" in s)
    with fake_world(tf.mesh, {"dp": 0}) as w:
        with pytest.raises(PlanError, match=rf"{path.name}:{line}: the train file starts a "
                           r"thread"):
            capture(tf, dict(tf.sizes), mesh=w.mesh, coords=w.coords, groups=w.groups)


# -- R34d-1 / R34d-2: where the work lands; R34d-3: threads in build_model / make_batch ---------

def _joined_between_ops(work):
    """A step that runs ``work(y)`` in a thread from a held starter, started and joined between
    two recorded ops (the thread sets sampled at the nodes are equal: R34d-1)."""
    def step(x):
        y = x * 2
        done = threading.Event()

        def run():
            try:
                work(y)
            except Exception:  # noqa: BLE001 -- the train file swallows the refusal
                pass
            done.set()
        HELD_START(run, ())
        done.wait(10)
        return y + 1
    return step


def test_a_collective_from_a_thread_joined_between_ops_is_refused():
    """R34d-1: the second all-reduce runs in a thread alive only between two recorded ops; the
    trace's fake mode refuses an op dispatched from another thread than the tracing one."""
    with fake_world({"dp": 2}, {"dp": 0}) as w:
        g = w.mesh["dp"].get_group()
        with pytest.raises(PlanError, match=r"another thread than the step's ran "
                           r"c10d.allreduce_.*R34d-1"):
            with threads_refused(HERE):
                make_fx(watched(_joined_between_ops(lambda y: dist.all_reduce(y, group=g))),
                        tracing_mode="fake")(torch.ones(4))


def test_an_update_from_a_thread_joined_between_ops_is_refused():
    """A gradient or parameter mutated from another thread is an op on the step's tensors."""
    with pytest.raises(PlanError, match=r"another thread than the step's ran aten.mul_"):
        with threads_refused(HERE):
            make_fx(watched(_joined_between_ops(lambda y: y.mul_(2))),
                    tracing_mode="fake")(torch.ones(4))


def test_a_ctypes_thread_has_its_own_ident():
    """R34d-2 (a): libc's pthread_create through ctypes; the callback runs Python with another
    ``threading.get_ident()`` than the caller's."""
    import ctypes

    seen = []
    libc = ctypes.CDLL(None)
    fn = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(
        lambda _a: seen.append(threading.get_ident()) or 0)
    tid = ctypes.c_ulong()
    libc.pthread_create.argtypes = [ctypes.POINTER(ctypes.c_ulong), ctypes.c_void_p,
                                    ctypes.c_void_p, ctypes.c_void_p]
    assert libc.pthread_create(ctypes.byref(tid), None, ctypes.cast(fn, ctypes.c_void_p),
                               None) == 0
    libc.pthread_join.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
    libc.pthread_join(tid, None)
    assert seen and seen[0] != threading.get_ident()


def test_the_fake_mode_is_given_back():
    def step(x):
        from torch._subclasses.fake_tensor import FakeTensorMode
        mode = thread_guard._fake_mode()  # noqa: SLF001
        assert "dispatch" in vars(mode)
        seen.append(mode)
        assert isinstance(mode, FakeTensorMode)
        return x + 1

    seen: list = []
    with threads_refused(HERE):
        make_fx(watched(step), tracing_mode="fake")(torch.ones(4))
    assert seen and "dispatch" not in vars(seen[0])


def test_threads_in_make_batch_that_end_are_let():
    """R34d-3: a thread pool for data prep in build_model / make_batch, ended on return."""
    with threads_refused(HERE):
        with thread_guard.threads_let(HERE):
            with concurrent.futures.ThreadPoolExecutor(2) as ex:
                rows = list(ex.map(lambda i: i * 2, range(4)))
        assert rows == [0, 2, 4, 6]
    with pytest.raises(PlanError, match=r"starts a thread"):   # wrapped again after it
        with threads_refused(HERE):
            with thread_guard.threads_let(HERE):
                pass
            threading.Thread(target=print).start()
    assert thread_guard.ACTIVE[0] is None


def test_a_thread_left_running_by_make_batch_is_refused():
    stop = threading.Event()
    try:
        with pytest.raises(PlanError, match=r"a thread started in build_model or make_batch "
                           r"still runs"):
            with threads_refused(HERE):
                with thread_guard.threads_let(HERE):
                    threading.Thread(target=stop.wait, args=(10,)).start()
    finally:
        stop.set()


def test_processes_stay_refused_in_make_batch():
    with pytest.raises(PlanError, match=r"os.fork"):
        with threads_refused(HERE):
            with thread_guard.threads_let(HERE):
                os.fork()


def _item_caught(y: torch.Tensor) -> torch.Tensor:
    t = torch.ones(1)
    try:
        n = float(t.item())          # an unbacked symbol in the fake trace: guarding raises
    except Exception:  # noqa: BLE001 -- the train file's fallback (R35a-3)
        n = 1.0
    return y * n


def test_a_data_dependent_value_caught_by_the_step_is_refused():
    """R35a-3: ``float(t.item())`` of a fake tensor raises (the capture cannot know the value);
    a step that catches it takes its fallback branch in the capture only (the real run reads
    2.0 after an all-reduce): refused when the step returns, naming the line."""
    with pytest.raises(PlanError, match=r"a Python value of the step's fake tensors was asked "
                       r"for.*R35a-3.*log it after the step") as e:
        with threads_refused(HERE):
            make_fx(watched(_item_caught), tracing_mode="fake")(torch.ones(4))
    # not a thread's finding: no advice about threads (round 36)
    assert "thread-local" not in str(e.value), e.value


def test_a_data_dependent_value_not_caught_ends_the_capture_as_before():
    """Uncaught, the shape env's own error ends the capture (not this guard's refusal), and the
    shape env's method is given back."""
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    def step(y: torch.Tensor) -> torch.Tensor:
        return y * float(torch.ones(1).item())

    with pytest.raises(GuardOnDataDependentSymNode):
        with threads_refused(HERE):
            make_fx(watched(step), tracing_mode="fake")(torch.ones(4))
    with threads_refused(HERE):
        gm = make_fx(watched(lambda y: y * 2.0), tracing_mode="fake")(torch.ones(4))
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == [
        torch.ops.aten.mul.Tensor]


def test_the_store_used_by_the_train_file_is_refused_even_if_caught():
    """R35a-2: ranks counted through the default store (the fake store raises, the train file
    caught it and used 1; the real store gives 2): recorded and refused when the capture ends;
    outside the capture the store raises only."""
    from torch.distributed import distributed_c10d as c10d

    with fake_world({"dp": 2}, {"dp": 0}):
        store = c10d._get_default_store()  # noqa: SLF001
        with pytest.raises(RuntimeError, match="holds nothing"):
            store.add("n", 1)
        with pytest.raises(PlanError, match=r"process group's key-value store \(get\).*R35a-2"):
            with threads_refused(HERE):
                try:
                    store.get("n")
                except RuntimeError:
                    pass


def test_value_hint_says_what_to_do_for_a_value_read():
    """R35d-5 / R35e-2: a capture that failed formatting or reading ``loss.item()`` says to log
    the returned loss; any other error gets no hint."""
    from spec_lang.torch_frontend.thread_guard import value_hint

    fmt = TypeError("unsupported format string passed to SymFloat.__format__")
    assert value_hint(fmt).startswith(" -- the step reads a tensor's value")
    assert "return it from train_step and log it after the step returns" in value_hint(fmt)

    class GuardOnDataDependentSymNode(RuntimeError):
        pass

    assert value_hint(GuardOnDataDependentSymNode("Could not guard on zuf0")) == value_hint(fmt)
    assert value_hint(RuntimeError("Attempting to broadcast a dimension of length 32")) == ""


@pytest.mark.parametrize("start", [
    lambda: __import__("subprocess").run(["true"], check=False),
    lambda: __import__("subprocess").check_output(["true"]),
    lambda: os.popen("true").read(),
    lambda: os.system("true"),
    lambda: os.posix_spawn("/bin/true", ["true"], {}),
    lambda: os.execv("/bin/true", ["true"]),
])
def test_a_program_started_is_refused_even_if_caught(start):
    """R36c-2: a ``TCPStore`` client in ``python -c`` read the launcher's store in the real
    run only; any program the train file starts is refused, the error caught or not, and the
    functions are torch's... Python's again afterwards."""
    import subprocess

    before = (subprocess.Popen._execute_child, os.system, os.posix_spawn, os.execv)  # noqa: SLF001
    with pytest.raises(PlanError, match=r"starts a thread or a process \((subprocess|os\.)"):
        with threads_refused(HERE):
            try:
                start()
            except Exception:  # noqa: BLE001
                pass
    assert (subprocess.Popen._execute_child, os.system, os.posix_spawn, os.execv) == before  # noqa: SLF001


def test_programs_stay_refused_in_make_batch():
    import subprocess

    with pytest.raises(PlanError, match=r"subprocess.Popen"):
        with threads_refused(HERE):
            with thread_guard.threads_let(HERE):
                subprocess.run(["true"], check=False)


def test_a_program_no_wrapper_sees_is_refused_by_the_children_it_leaves():
    """R37a-1: ``posix.system`` (and libc's ``system()`` through ctypes) start a program past
    every wrapper; the kernel's counters of reaped children change: refused at the end."""
    import ctypes
    import posix

    for run in (lambda: posix.system("true"),
                lambda: ctypes.CDLL(None).system(b"true")):
        with pytest.raises(PlanError, match=r"a process ran while the capture ran the train "
                           r"file's code \(the kernel's count of this process's children"):
            with threads_refused(HERE):
                run()
    with threads_refused(HERE):          # nothing started: nothing refused
        pass


def test_a_program_run_at_import_is_refused():
    """R37a-3: a ``subprocess.run`` at module level (the launcher's store is up before the
    import in the real run, not in the capture)."""
    import subprocess

    from spec_lang.torch_frontend.fake_answers import importing

    with pytest.raises(PlanError, match=r"train.py:1: a process ran when the train file was imported"):
        with importing("train.py"):
            subprocess.run(["true"], check=False)
