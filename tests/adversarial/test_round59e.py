"""Adversarial round 59e (``tests/adversarial/ATTEMPTS.md``, "Round 59e"): 0d2fa5b's
``value_text`` (``trained_objects``, ``c_value``) and ``c_registries`` fixes attacked.

Plans in ``plans/round59e/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``.
The fast tests call ``process_state._process_state`` and ``state_changes`` around a SIGUSR1
handler partial (``test_round59c._signal_changes``).
"""

from __future__ import annotations

import collections
import ctypes
import decimal
import functools
import hashlib
import io
import itertools
import mmap
import re
import zlib
from pathlib import Path

import pytest

from tests.adversarial.test_round59c import _handler, _seen, _signal_changes
from spec_lang.torch_frontend.value_text import UNREADABLE

ROUND = Path(__file__).resolve().parent / "plans" / "round59e"


def _prove(path: Path) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


def _nest(depth: int) -> tuple[list, list]:
    """(outer, innermost): ``innermost`` is ``[0]`` inside ``depth`` one-item lists."""
    inner = [0]
    o = inner
    for _ in range(depth):
        o = [o]
    return o, inner


# -- R59e-1: TOO_DEEP in the signal handlers' entry is escaped by repr (false accept r59e_03) --

@pytest.mark.state_modules()
def test_r59e_1_too_deep_marker_survives_the_handlers_entry():
    from spec_lang.torch_frontend.process_state import _process_state, release_kept
    from spec_lang.torch_frontend.step_state import UNREADABLE
    import signal

    outer, _ = _nest(10)
    old = signal.signal(signal.SIGUSR1, functools.partial(_handler, outer))
    try:
        text = _process_state()["the process's working directory, umask and signal handlers"]
    finally:
        signal.signal(signal.SIGUSR1, old)
        release_kept()
    assert "partial nested too deep" in text    # deep_text did give up ...
    assert text.startswith(UNREADABLE)          # ... but the entry is not unreadable


def _unreadable_or_seen(handler, mutate) -> bool:
    """The no-op step is no change or leaves the entry unreadable (UNKNOWN either way), and
    ``mutate`` is a change or unreadable (since R59e-1's fix a value past the depth, the
    budget or unreadable C data makes the entry unreadable)."""
    noop = _signal_changes(handler, lambda: None)
    assert all(v.startswith(UNREADABLE) for v in noop.values())
    return bool(_signal_changes(handler, mutate))


@pytest.mark.state_modules()
@pytest.mark.parametrize("depth", [8, 10])
def test_r59e_1_counter_nested_past_the_depth_seen(depth):
    outer, inner = _nest(depth)
    handler = functools.partial(_handler, outer)
    assert _unreadable_or_seen(handler, lambda: inner.__setitem__(0, 1))


@pytest.mark.state_modules()
def test_r59e_1_control_counter_six_deep_seen():
    outer, inner = _nest(6)
    assert _seen(outer, lambda o: inner.__setitem__(0, 1))


@pytest.mark.state_modules()
def test_r59e_1_list_attribute_of_a_tensor_held_by_a_handler_seen():
    import torch

    t = torch.zeros(1)
    t.hist = []
    handler = functools.partial(_handler, t)
    assert _signal_changes(handler, lambda: t.hist.append(1))   # (or unreadable)


@pytest.mark.slow
def test_r59e_1_deep_list_prove_not_equivalent():
    assert _prove(ROUND / "r59e_03_handler_deep_list_wrong.py") != 0


# -- R59e-2: C types c_value does not read (the documented gap, instances measured) -----------

_C_GAP = {
    "StringIO": (io.StringIO, lambda o: o.write("x")),
    "sha1": (hashlib.sha1, lambda o: o.update(b"x")),
    "zlib_compressobj": (zlib.compressobj, lambda o: o.compress(b"x" * 100)),
    "decimal_context": (decimal.Context, lambda o: setattr(o, "prec", 5)),
    "mmap": (lambda: mmap.mmap(-1, 16), lambda o: o.__setitem__(0, 7)),
    "ctypes_array": (lambda: (ctypes.c_int * 2)(), lambda o: o.__setitem__(0, 3)),
    "re_scanner": (lambda: re.compile("a").scanner("aaa"), lambda o: o.search()),
    "pairwise": (lambda: itertools.pairwise([1, 2, 3, 4]), next),
    "deque_iterator": (lambda: iter(collections.deque([1, 2, 3])), next),
}


@pytest.mark.state_modules()
@pytest.mark.parametrize("kind", sorted(_C_GAP))
def test_r59e_2_c_data_held_by_a_handler_seen(kind):
    make, mutate = _C_GAP[kind]
    obj = make()
    assert _unreadable_or_seen(functools.partial(_handler, obj), lambda: mutate(obj))


@pytest.mark.state_modules()
def test_r59e_2_control_bytearray_seen():
    assert _seen(bytearray(1), lambda o: o.__setitem__(0, 1))


class _Obj:
    pass


@pytest.mark.state_modules()
@pytest.mark.parametrize("entry", ["finalizers pending", "exit callbacks (atexit)"])
def test_r59e_1_counter_nested_past_the_depth_in_finalizer_or_exit_callback_seen(entry):
    import atexit
    import weakref

    from spec_lang.torch_frontend.process_state import _process_state, release_kept
    from spec_lang.torch_frontend.step_state import UNREADABLE

    outer, inner = _nest(10)
    obj = _Obj()
    fin = weakref.finalize(obj, _handler, outer) if entry.startswith("final") else None
    if fin is None:
        atexit.register(_handler, outer)
    try:
        s0 = _process_state()
        inner[0] = 1
        s1 = _process_state()
    finally:
        if fin is None:
            atexit.unregister(_handler)
        else:
            fin.detach()
        release_kept()
    assert s0[entry] != s1[entry] or s0[entry].startswith(UNREADABLE)


@pytest.mark.slow
def test_r59e_control_sigterm_checkpoint_right_prove_equivalent():
    assert _prove(ROUND / "r59e_04_sigterm_checkpoint_right.py") == 0
