"""Adversarial round 58g (``tests/adversarial/ATTEMPTS.md``, "Round 58g"): 369d208's per-object
entries for torch's own finalizers (``process_state._finalizers``, ``TORCH_FINALIZER``; an entry
that appears or disappears is no change in ``step_state.state_changes``), the ``own_code`` test
for them and the signal handlers read with ``_global_text``, attacked.

Plans in ``plans/round58g/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``.
The fast tests call ``process_state._c_state`` / ``_process_state`` and ``state_changes``.
"""

from __future__ import annotations

import functools
import gc
import signal
import types
import weakref
from pathlib import Path

import pytest
import torch
from torch import nn

ROUND = Path(__file__).resolve().parent / "plans" / "round58g"


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


def _prove(path: Path) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


def _counter(*_):
    return None


# -- R58g-1: torch's finalizer moved to a new object: an entry that appears is no change -------

@pytest.mark.state_modules("weakref")
def test_r58g_1_counter_moved_to_a_new_objects_finalizer_seen():
    """The step detaches torch's finalizer on an object it lets die and registers one with the
    counter + 1 on a new ``nn.Linear`` the finalizer's own arguments keep alive (r58g_01)."""
    old = nn.Linear(1, 1, bias=False)
    fz = weakref.finalize(old, torch.typename, old, 1)
    made = []

    def step():
        n = weakref.finalize._registry[fz].args[1]  # noqa: SLF001
        fz.detach()
        new = nn.Linear(1, 1, bias=False)
        made.append(weakref.finalize(new, torch.typename, new, n + 1))
        gc.collect()

    try:
        changed = _changes(step)
    finally:
        for f in (fz, *made):
            f.detach()
    assert changed, "the counter moved to a new object's finalizer is unseen"


@pytest.mark.state_modules("weakref")
def test_r58g_1_finalizer_moved_between_live_objects_seen():
    """Both objects alive before and after; the finalizer (and its arguments) moves from one
    to the other: one entry disappears, one appears, both exempt."""
    a, b = nn.Linear(1, 1), nn.Linear(1, 1)
    fa = weakref.finalize(a, torch.typename, 5)
    made = []

    def step():
        fa.detach()
        made.append(weakref.finalize(b, torch.typename, 5))

    try:
        changed = _changes(step)
    finally:
        for f in (fa, *made):
            f.detach()
    assert changed


@pytest.mark.state_modules("weakref")
def test_r58g_1_control_args_of_a_live_objects_finalizer_seen():
    """R58f-1's fix holds: the same object, its finalizer's arguments rebound, is a change."""
    lin = nn.Linear(1, 1)
    fz = weakref.finalize(lin, torch.typename, 0)
    try:
        changed = _changes(lambda: setattr(weakref.finalize._registry[fz], "args", (1,)))
    finally:
        fz.detach()
    assert changed          # (a user entry since the fix: only Library's own are torch's)


@pytest.mark.slow
def test_r58g_1_prove_not_equivalent():
    assert _prove(ROUND / "r58g_01_torch_finalizer_new_object_carries_wrong.py") != 0


# -- R58g-2: a functools.partial signal handler is read without its function and arguments -----

class _Box:
    def __init__(self):
        self.n = 0

    def __call__(self, sig, frame):
        return self.n


def _handler(box, sig, frame):
    return box.n


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


@pytest.mark.state_modules()
def test_r58g_2_partial_handler_box_attribute_seen():
    box = _Box()
    assert not _signal_changes(functools.partial(_handler, box), lambda: None)
    assert _signal_changes(functools.partial(_handler, box), lambda: setattr(box, "n", 1))


@pytest.mark.state_modules()
def test_r58g_2_partial_handler_setstate_seen():
    p = functools.partial(_handler, 0)
    assert _signal_changes(p, lambda: p.__setstate__((_handler, (1,), {}, None)))


@pytest.mark.state_modules()
def test_r58g_2_control_callable_object_and_bound_method_handlers_seen():
    """A callable object and a bound method as the handler: their object's attribute rebound is
    a change (R58f-2's fix reads the handler with ``_global_text``)."""
    box = _Box()
    assert _signal_changes(box, lambda: setattr(box, "n", 1))
    box2 = _Box()
    assert _signal_changes(types.MethodType(_handler, box2), lambda: setattr(box2, "n", 1))


@pytest.mark.slow
def test_r58g_2_prove_not_equivalent():
    assert _prove(ROUND / "r58g_02_signal_handler_partial_wrong.py") != 0


# -- R58g-3: own_code passes a function the user built from torch's code, with its defaults ----

@pytest.mark.state_modules("weakref")
def test_r58g_3_own_code_function_defaults_seen():
    t = torch.typename
    f = types.FunctionType(t.__code__, t.__globals__, "typename", (0,))
    lin = nn.Linear(1, 1)
    fz = weakref.finalize(lin, f)
    try:
        changed = _changes(lambda: setattr(f, "__defaults__", (1,)))
    finally:
        fz.detach()
    assert changed


@pytest.mark.slow
def test_r58g_3_prove_not_equivalent():
    assert _prove(ROUND / "r58g_03_own_code_user_defaults_wrong.py") != 0
