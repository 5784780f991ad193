"""Adversarial round 57d (``tests/adversarial/ATTEMPTS.md``, "Round 57d"): 5efcd33 (round 57c's
six findings fixed: ``special_values``, ``value_text._items`` / ``_slots`` / ``_slot_count``,
``step_state._Encoder.enc``'s C-base fallback) attacked by other routes.

Plans in ``plans/round57d/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``
(r57d_01 and r57d_05 double its gradients from the second step on: step 1 w0 0.0 / step 2 w0 0.0058;
r57d_02..04 are right plans). The fast tests call ``step_state._Encoder`` directly.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

import pytest

ROUND = Path(__file__).resolve().parent / "plans" / "round57d"


def _text(v) -> tuple[str, bool]:
    """``v``'s fingerprint text and whether it is marked unreadable."""
    from spec_lang.torch_frontend.step_state import _Encoder

    e = _Encoder({}, frozenset())
    t = e.enc(v)
    return t, e.unreadable


def _seen(v, change) -> bool:
    """Whether ``change()`` is visible: the text changes, or ``v`` is unreadable."""
    t0, u0 = _text(v)
    change()
    t1, u1 = _text(v)
    return t0 != t1 or u0 or u1


# -- R57d-1: a deleted slot descriptor hidden by an alias of another slot's descriptor --------

def _slot_deleted_other_aliased():
    class _S:
        __slots__ = ("a", "n")

    n = _S.__dict__["n"]
    del _S.n
    _S.alias = _S.__dict__["a"]     # found (2) == _slot_count (2)
    v = _S()
    v.a = 0
    n.__set__(v, 0)
    return v, lambda: n.__set__(v, 5)


@pytest.mark.state_modules()
def test_r57d_1_slot_alias_change_seen():
    v, change = _slot_deleted_other_aliased()
    assert _seen(v, change)


# -- R57d-2: an lru_cache read by its ``__wrapped__`` attribute, not the function it calls ----

def _lru_wrapped_replaced():
    import functools

    cell = [0]
    f = functools.lru_cache(maxsize=0)(lambda: cell)
    f.__wrapped__ = len

    def change():
        f()[0] += 1
        f.cache_clear()     # the statistics back to (0, 0, 0, 0)
    return f, change


@pytest.mark.state_modules()
def test_r57d_2_lru_wrapped_replaced_change_seen():
    v, change = _lru_wrapped_replaced()
    assert _seen(v, change)


# -- controls: the round 57c route (no alias) is still refused --------------------------------

def _slot_deleted():
    class _S:
        __slots__ = ("a", "n")

    n = _S.__dict__["n"]
    del _S.n
    v = _S()
    v.a = 0
    n.__set__(v, 0)
    return v, lambda: n.__set__(v, 5)


@pytest.mark.state_modules()
def test_r57d_control_slot_deleted_unreadable():
    v, _ = _slot_deleted()
    assert _text(v)[1] is True


# -- R57d-3: a logging.FileHandler (ordinary training code) is now unreadable -----------------

@pytest.mark.state_modules()
@pytest.mark.xfail(strict=True, reason="R57d-3: FileHandler's open stream is a file object")
def test_r57d_3_filehandler_readable():
    fd, path = tempfile.mkstemp()
    os.close(fd)
    h = logging.FileHandler(path)
    try:
        assert _text(h)[1] is False
    finally:
        h.close()
        os.unlink(path)


@pytest.mark.state_modules()
def test_r57d_control_filehandler_delayed_readable():
    """A ``FileHandler(delay=True)`` before its first record holds no stream: read."""
    h = logging.FileHandler(os.path.join(tempfile.gettempdir(), "r57d_never.log"), delay=True)
    t, unread = _text(h)
    assert unread is False
    assert "logging.FileHandler(" in t


# -- R57d-4: a threading.Thread (holds sys.stderr as ``_stderr``) is now unreadable ---------

@pytest.mark.state_modules()
def test_r57d_4_joined_thread_readable(monkeypatch):
    import threading

    # a thread keeps the ``threading.excepthook`` of its start; pytest's holds a deque of
    # every exception an earlier test's thread raised (with tracebacks, frames, the session):
    # read through it the text's recursion went past Python's limit in a busy xdist worker
    monkeypatch.setattr(threading, "excepthook", threading.__excepthook__)
    t = threading.Thread(target=sum, args=([1, 2],))
    t.start()
    t.join()
    assert _text(t)[1] is False


@pytest.mark.state_modules()
def test_r57d_4_standard_stream_named_by_identity(monkeypatch):
    """The stream ``sys`` holds is named (R57d-4's fix); the same object once ``sys`` holds
    another reads differently (the step replaced it), and another file object stays
    unreadable (R57c-3)."""
    import io
    import sys

    orig = sys.stderr
    mine = io.TextIOWrapper(io.BufferedWriter(io.FileIO(os.devnull, "w")))
    try:
        before, unread = _text([orig])
        assert unread is False and "<sys.stderr>" in before
        assert _text([mine])[1] is True         # not sys's: a file object, unreadable
        monkeypatch.setattr(sys, "stderr", mine)
        now, unread = _text([mine])
        assert unread is False and "<sys.stderr>" in now
        assert _text([orig])[0] != before       # sys.__stderr__ now, or unreadable
        monkeypatch.undo()
        assert _text([mine])[1] is True
    finally:
        mine.close()


# -- proves --------------------------------------------------------------------------------

def _prove(path: Path) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


@pytest.mark.slow
def test_r57d_1_prove_not_equivalent():
    assert _prove(ROUND / "r57d_01_slot_deleted_other_aliased_wrong.py") != 0


@pytest.mark.slow
def test_r57d_2_prove_not_equivalent():
    assert _prove(ROUND / "r57d_05_lru_wrapped_replaced_wrong.py") != 0


@pytest.mark.slow
def test_r57d_control_basicconfig_equivalent():
    assert _prove(ROUND / "r57d_02_basicconfig_right.py") == 0


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R57d-3: false UNKNOWN (rc 2) since 5efcd33")
def test_r57d_3_filehandler_equivalent():
    assert _prove(ROUND / "r57d_03_filehandler_right.py") == 0


@pytest.mark.slow
def test_r57d_4_joined_thread_equivalent():
    assert _prove(ROUND / "r57d_04_joined_thread_right.py") == 0
