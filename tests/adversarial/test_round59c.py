"""Adversarial round 59c (``tests/adversarial/ATTEMPTS.md``, "Round 59c"): 13013c4's
``value_text.deep_text`` (signal handlers, finalizers, exit callbacks and codec entries read with
all they hold) and ``c_registries.c_settings`` (C-kept settings) attacked.

Plans in ``plans/round59c/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``.
The fast tests call ``process_state._process_state`` and ``state_changes`` around a SIGUSR1
handler (as ``test_round59b`` does), or ``c_registries.c_settings`` around a setting's change.
"""

from __future__ import annotations

import array
import ctypes
import functools
import io
import itertools
import os
import random
import signal
import tracemalloc
from pathlib import Path

import pytest

ROUND = Path(__file__).resolve().parent / "plans" / "round59c"


def _prove(path: Path) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


def _handler(*a: object, **k: object) -> None:
    return None


def _signal_changes(handler, mutate) -> dict[str, str]:
    """``state_changes`` of the process state around ``mutate()`` with ``handler`` on SIGUSR1."""
    from spec_lang.torch_frontend.process_state import _process_state, release_kept
    from spec_lang.torch_frontend.step_state import state_changes

    old = signal.signal(signal.SIGUSR1, handler)
    try:
        s0 = _process_state()
        mutate()
        s1 = _process_state()
        return state_changes(s0, s1)
    finally:
        signal.signal(signal.SIGUSR1, old)
        release_kept()


def _seen(obj, mutate) -> bool:
    """Whether ``mutate(obj)`` is a change, ``obj`` reached only as the argument of the
    SIGUSR1 handler partial (a no-op step is checked to be no change first)."""
    handler = functools.partial(_handler, obj)
    assert not _signal_changes(handler, lambda: None)
    return bool(_signal_changes(handler, lambda: mutate(obj)))


def _meter():
    import torch

    class Meter(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.hist: list[int] = []

    return Meter()


# -- R59c-1: a user nn.Module subclass held by a handler, not part of the model (false accept:
#    r59c_01; deep_text stops at torch Module instances, _torch_state) -------------------------

@pytest.mark.state_modules()
def test_r59c_1_list_in_a_module_subclass_held_by_a_handler_seen():
    assert _seen(_meter(), lambda m: m.hist.append(1))


@pytest.mark.state_modules()
def test_r59c_1_control_int_attribute_of_a_module_subclass_seen():
    m = _meter()
    m.n = 0
    assert _seen(m, lambda m: setattr(m, "n", 1))


@pytest.mark.slow
def test_r59c_1_module_subclass_list_prove_not_equivalent():
    assert _prove(ROUND / "r59c_01_handler_module_subclass_list_wrong.py") != 0


@pytest.mark.slow
def test_r59c_1_control_module_subclass_int_prove_not_equivalent():
    assert _prove(ROUND / "r59c_02_handler_module_subclass_int_wrong.py") != 0


# -- R59c-2: objects whose state is C data, no reference (gc.get_referents reads nothing) -------

_C_STATE = {
    "random.Random": (lambda: random.Random(0), lambda r: r.random()),
    "itertools.count": (itertools.count, next),
    "bytearray": (lambda: bytearray(1), lambda b: b.__setitem__(0, 1)),
    "array.array": (lambda: array.array("i", [0]), lambda a: a.__setitem__(0, 1)),
    "io.BytesIO": (io.BytesIO, lambda f: f.write(b"x")),
    "ctypes.c_int": (lambda: ctypes.c_int(0), lambda c: setattr(c, "value", 1)),
    "list_iterator": (lambda: iter([1, 2, 3]), next),
}


@pytest.mark.state_modules()
@pytest.mark.parametrize("kind", sorted(_C_STATE))
def test_r59c_2_c_state_held_by_a_handler_seen(kind):
    make, mutate = _C_STATE[kind]
    assert _seen(make(), mutate)


@pytest.mark.state_modules()
def test_r59c_2_control_list_held_by_a_handler_seen():
    assert _seen([], lambda x: x.append(1))


# -- R59c-3: C settings not in c_settings ----------------------------------------------------

def _settings_change(change, undo) -> bool:
    from spec_lang.torch_frontend.c_registries import c_settings

    before = c_settings()
    change()
    try:
        return c_settings() != before
    finally:
        undo()


def _tracemalloc_start() -> None:
    tracemalloc.start(7)


@pytest.mark.state_modules()
def test_r59c_3_tracemalloc_limit_read():
    assert _settings_change(_tracemalloc_start, tracemalloc.stop)


@pytest.mark.state_modules()
def test_r59c_3_ctypes_errno_read():
    old = ctypes.get_errno()
    assert _settings_change(lambda: ctypes.set_errno(old + 17), lambda: ctypes.set_errno(old))


@pytest.mark.state_modules()
def test_r59c_3_putenv_read():
    assert _settings_change(lambda: os.putenv("R59C_UNIT", "1"),
                            lambda: os.unsetenv("R59C_UNIT"))


# -- the proves of R59c-2 and R59c-3 (false accepts: truth step 2 w0 0.0058) -------------------

@pytest.mark.slow
@pytest.mark.parametrize("plan", [
    "r59c_03_handler_random_wrong.py", "r59c_04_handler_itertools_count_wrong.py",
    "r59c_05_handler_bytearray_wrong.py", "r59c_06_tracemalloc_limit_wrong.py",
    "r59c_07_ctypes_errno_wrong.py"])
def test_r59c_2_3_c_state_prove_not_equivalent(plan):
    assert _prove(ROUND / plan) != 0


@pytest.mark.slow
def test_r59c_3_putenv_prove_not_equivalent():
    assert _prove(ROUND / "r59c_08_putenv_wrong.py") != 0


@pytest.mark.slow
def test_r59c_audit_hook_caught_prove_refused():
    # the capture refuses the caught AuditHookAdded (exit 3, a named line), never EQUIVALENT
    assert _prove(ROUND / "r59c_09_audit_hook_caught_wrong.py") in (2, 3)


@pytest.mark.slow
def test_r59c_atexit_metrics_list_prove_not_equivalent():
    # the exit callback's argument appended to in the step: UNKNOWN (rc 2) through atexit
    assert _prove(ROUND / "r59c_10_atexit_metrics_list_wrong.py") != 0
