"""Adversarial round 58f (``tests/adversarial/ATTEMPTS.md``, "Round 58f"): d369c54's
"finalizers pending" (weakref.finalize's registry captured at import, torch's own finalizers
skipped by baseline code and class), "gc callbacks" and the sys.modules readers, attacked.

Plans in ``plans/round58f/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``.
The fast tests call ``process_state._c_state`` and ``process_state._process_state`` directly.
"""

from __future__ import annotations

import codecs
import signal
import weakref
from pathlib import Path

import pytest
import torch
from torch import nn

from spec_lang.torch_frontend.value_text import UNREADABLE

ROUND = Path(__file__).resolve().parent / "plans" / "round58f"


def _pending() -> str:
    from spec_lang.torch_frontend.process_state import _c_state

    return _c_state(False)["finalizers pending"]


def _state() -> dict[str, str]:
    from spec_lang.torch_frontend.process_state import _process_state

    return _process_state()


def _noop(n):
    return None


def _prove(path: Path) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


# -- R58f-1: a torch function's finalizer on a torch object is skipped with its arguments ------

@pytest.mark.state_modules("weakref")
def test_r58f_1_torch_finalizer_args_rebound_seen():
    """``weakref.finalize(nn.Linear, torch.typename, 0)``: baseline code on a baseline torch
    class, so "finalizers pending" skips it whole; its ``_Info.args`` rebound (the step's
    counter) is unseen."""
    from spec_lang.torch_frontend.process_state import _c_state, release_kept
    from spec_lang.torch_frontend.step_state import state_changes

    lin = nn.Linear(2, 2)
    fz = weakref.finalize(lin, torch.typename, 0)
    try:
        c0 = _c_state(False)        # (torch's own: an entry per object since the fix)
        weakref.finalize._registry[fz].args = (1,)  # noqa: SLF001
        c1 = _c_state(False)
        changed = state_changes(c0, c1)
    finally:
        fz.detach()
        release_kept()
    assert changed          # (a user entry since R58g-1's fix: only Library's own are torch's)


@pytest.mark.state_modules("weakref")
def test_r58f_1_fix_torch_finalizer_made_or_run_in_the_step_is_no_change():
    """F11-1 kept: torch's own finalizer on an object the step makes, or on one that dies in
    the step (its finalizer runs), changes nothing; only one on an object alive before and
    after is compared."""
    import gc

    from spec_lang.torch_frontend.process_state import _c_state, release_kept
    from spec_lang.torch_frontend.step_state import state_changes

    old = nn.Linear(2, 2)
    weakref.finalize(old, torch.typename, 0)
    c0 = _c_state(False)
    release_kept()              # (the step's objects are not kept alive by the fingerprint)
    del old
    gc.collect()
    new = nn.Linear(2, 2)
    fz = weakref.finalize(new, torch.typename, 0)
    try:
        c1 = _c_state(False)
        changed = state_changes(c0, c1)
    finally:
        fz.detach()
        release_kept()
    assert not any(k.startswith("torch's finalizer ") for k in changed), changed


@pytest.mark.state_modules("weakref")
def test_r58f_control_user_function_on_torch_object_args_seen():
    """The same finalizer with the user's function is read with its arguments."""
    lin = nn.Linear(2, 2)
    fz = weakref.finalize(lin, _noop, 0)
    try:
        p0 = _pending()
        weakref.finalize._registry[fz].args = (1,)  # noqa: SLF001
        p1 = _pending()
    finally:
        fz.detach()
    assert p0 != p1
    assert "_noop" in p0 and "Linear" in p0


@pytest.mark.slow
def test_r58f_1_prove_not_equivalent():
    assert _prove(ROUND / "r58f_01_torch_finalizer_args_skipped_wrong.py") != 0


# -- R58f-2: a signal handler is read by identity; its closure cell rebound is unseen ----------

def _handler_with_cell(n):
    def _handler(sig, frame):
        return n

    return _handler


@pytest.mark.state_modules()
def test_r58f_2_signal_handler_closure_cell_seen():
    h = _handler_with_cell(0)
    old = signal.signal(signal.SIGUSR1, h)
    try:
        s0 = _state()
        h.__closure__[0].cell_contents = 1     # the step's counter
        s1 = _state()
    finally:
        signal.signal(signal.SIGUSR1, old)
    assert s0 != s1 or any(v.startswith(UNREADABLE) for v in s0.values())


@pytest.mark.slow
def test_r58f_2_prove_not_equivalent():
    assert _prove(ROUND / "r58f_02_signal_handler_closure_wrong.py") != 0


# -- R58f-3: an object in the interpreter's codec cache ----------------------------------------

def _search(name):
    if name == "r58f_unit_codec":
        info = codecs.CodecInfo(None, None, name="r58f_unit_codec")
        info.n = 0
        return info
    return None


@pytest.mark.state_modules()
def test_r58f_3_codec_cache_attribute_seen():
    codecs.register(_search)
    try:
        assert codecs.lookup("r58f_unit_codec").n == 0
        s0 = _state()
        codecs.lookup("r58f_unit_codec").n = 1     # the step's counter
        s1 = _state()
    finally:
        codecs.unregister(_search)
    assert s0 != s1 or any(v.startswith(UNREADABLE) for v in s0.values())


@pytest.mark.slow
def test_r58f_3_prove_not_equivalent():
    assert _prove(ROUND / "r58f_03_codec_cache_wrong.py") != 0


# -- R58f-4: an object in the interpreter's list of exit callbacks ----------------------------

class _Box:
    """An exit callback whose ``__eq__`` (``atexit.unregister`` compares by ``==``) bumps."""

    def __init__(self):
        self.n = 0

    def __call__(self):
        return None

    def __eq__(self, other):
        if other == "bump":
            self.n += 1
        return False

    __hash__ = object.__hash__


@pytest.mark.state_modules()
def test_r58f_4_atexit_callback_state_seen():
    import atexit

    box = _Box()
    atexit.register(box)
    try:
        s0 = _state()
        atexit.unregister("bump")      # the step's counter, reached by atexit alone
        s1 = _state()
    finally:
        atexit.unregister(box)
    assert box.n == 1
    assert s0 != s1 or any(v.startswith(UNREADABLE) for v in s0.values())


@pytest.mark.slow
def test_r58f_4_prove_not_equivalent():
    assert _prove(ROUND / "r58f_05_atexit_callback_wrong.py") != 0


# -- right plans -------------------------------------------------------------------------------

@pytest.mark.slow
def test_r58f_right_tempdir_dataloader_equivalent():
    assert _prove(ROUND / "r58f_04_tempdir_dataloader_right.py") == 0
