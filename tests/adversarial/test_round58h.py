"""Adversarial round 58h (``tests/adversarial/ATTEMPTS.md``, "Round 58h"): 0105bee's
``process_state._library_finalizer`` (only ``torch.library``'s own finalizer shape is torch's,
an entry that appears or disappears no change) and ``value_text.object_text`` reading a
``functools.partial`` to depth 3, attacked.

Plans in ``plans/round58h/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``.
The fast tests call ``process_state._c_state`` / ``_process_state`` and ``state_changes``.
"""

from __future__ import annotations

import functools
import gc
import signal
import weakref
from pathlib import Path

import pytest
import torch

ROUND = Path(__file__).resolve().parent / "plans" / "round58h"


def _prove(path: Path) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


def _changes(mutate) -> dict[str, str]:
    """``state_changes`` of the C-kept process state around ``mutate()``."""
    from spec_lang.torch_frontend.process_state import _c_state, release_kept
    from spec_lang.torch_frontend.step_state import state_changes

    c0 = _c_state(False)
    try:
        mutate()
        c1 = _c_state(False)
        return state_changes(c0, c1)
    finally:
        release_kept()


# -- R58h-1: the counter is how many torch Library objects (torch's own finalizer) are alive ----

def _libraries(ns: str) -> list:
    """The live ``torch.library.Library`` objects of namespace ``ns`` with a pending finalizer."""
    out = []
    for f, info in list(weakref.finalize._registry.items()):  # noqa: SLF001
        obj = f.peek()
        if info.func is torch.library._del_library and obj and obj[0].ns == ns:  # noqa: SLF001
            out.append(obj[0])
    return out


def _new_library(ns: str) -> None:
    lib = torch.library.Library(ns, "FRAGMENT")
    lib._op_impls.add(lib)      # noqa: SLF001 -- kept alive by its own finalizer's argument


def _drop_libraries(ns: str) -> None:
    for lib in _libraries(ns):
        lib._op_impls.discard(lib)      # noqa: SLF001
    gc.collect()


@pytest.mark.state_modules()
def test_r58h_1_one_more_library_seen():
    """The step makes one more ``Library`` kept alive by a cycle through its ``_op_impls`` (the
    finalizer's argument): nothing alive before changes; the count is the counter (r58h_01)."""
    try:
        _new_library("r58h_t1")
        assert len(_libraries("r58h_t1")) == 1
        changed = _changes(lambda: _new_library("r58h_t1"))
        assert len(_libraries("r58h_t1")) == 2
        assert changed, "a new torch Library (the counter + 1) is unseen"
    finally:
        _drop_libraries("r58h_t1")


@pytest.mark.state_modules()
def test_r58h_1_control_library_not_torch_own_seen():
    """Control: the same shape with the library's ``m`` rebound is no longer torch's own; its
    finalizer is read as the user's, so a new one is a change."""
    made = []

    def step():
        lib = torch.library.Library("r58h_t1c", "FRAGMENT")
        lib._op_impls.add(lib)  # noqa: SLF001
        made.append(lib)
        lib.m = None            # args[5] no longer the library's own m: the user's
    try:
        assert _changes(step)
    finally:
        for lib in made:
            lib._op_impls.discard(lib)  # noqa: SLF001
        made.clear()
        gc.collect()


@pytest.mark.slow
def test_r58h_1_prove_not_equivalent():
    assert _prove(ROUND / "r58h_01_library_finalizer_count_wrong.py") != 0


# -- R58h-2: a partial read to depth 3 only ------------------------------------------------------

class _Box:
    def __init__(self):
        self.n = 0


def _handler(*a):
    return None


def _signal_changes(handler, mutate) -> dict[str, str]:
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


def _nested(box, depth: int):
    p = functools.partial(_handler, box)
    for _ in range(depth - 1):
        p = functools.partial(_handler, p)
    return p


@pytest.mark.state_modules()
def test_r58h_2_box_four_partials_deep_seen():
    box = _Box()
    handler = _nested(box, 4)
    assert not _signal_changes(handler, lambda: None)
    assert _signal_changes(handler, lambda: setattr(box, "n", 1))


@pytest.mark.state_modules()
def test_r58h_2_control_box_three_partials_deep_seen():
    box = _Box()
    handler = _nested(box, 3)
    assert not _signal_changes(handler, lambda: None)
    assert _signal_changes(handler, lambda: setattr(box, "n", 1))


@pytest.mark.state_modules()
def test_r58h_2_control_partial_subclass_and_keywords_seen():
    """Control: a ``partial`` subclass's box and a box in its keywords (``__setstate__`` makes
    the keywords an exact dict) are read."""
    class P(functools.partial):
        pass
    box, kbox = _Box(), _Box()
    assert _signal_changes(P(_handler, box), lambda: setattr(box, "n", 1))
    assert _signal_changes(functools.partial(_handler, k=kbox), lambda: setattr(kbox, "n", 1))


@pytest.mark.slow
def test_r58h_2_prove_not_equivalent():
    assert _prove(ROUND / "r58h_02_signal_handler_partial_depth4_wrong.py") != 0


# -- R58h-3: a box in a tuple argument of a partial ----------------------------------------------

@pytest.mark.state_modules()
def test_r58h_3_box_in_a_tuple_argument_seen():
    box = _Box()
    handler = functools.partial(_handler, (box,))
    assert not _signal_changes(handler, lambda: None)
    assert _signal_changes(handler, lambda: setattr(box, "n", 1))


# -- R58h-4: a partial whose function is a method-wrapper of the user's object ------------------

@pytest.mark.state_modules()
def test_r58h_4_partial_of_a_method_wrapper_seen():
    box = _Box()
    handler = functools.partial(box.__eq__)
    assert not _signal_changes(handler, lambda: None)
    assert _signal_changes(handler, lambda: setattr(box, "n", 1))


@pytest.mark.state_modules()
def test_r58h_4_control_method_wrapper_handler_seen():
    """Control: the same method-wrapper installed as the handler itself is read with its
    object's attributes."""
    box = _Box()
    assert _signal_changes(box.__eq__, lambda: setattr(box, "n", 1))


# -- controls: right plans stay EQUIVALENT -------------------------------------------------------

@pytest.mark.slow
def test_r58h_control_tempdir_and_user_finalizer_equivalent():
    assert _prove(ROUND / "r58h_03_tempdir_user_finalizer_right.py") == 0
