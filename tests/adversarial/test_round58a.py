"""Adversarial round 58a (``tests/adversarial/ATTEMPTS.md``, "Round 58a"): 4dcd0ad and 148ec35
(``value_text._slots`` / ``digest_texts``, ``special_values.special_text``'s lru_cache and
standard-stream branches) attacked by other routes.

Plans in ``plans/round58a/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``
(r58a_01..04 double its gradients from the second step on: step 1 w0 0.0 / step 2 w0 0.0058;
r58a_05 is a right plan). The fast tests call ``step_state._Encoder`` directly.
"""

from __future__ import annotations

import functools
import io
import sys
from pathlib import Path

import pytest

ROUND = Path(__file__).resolve().parent / "plans" / "round58a"


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


class _Cell(dict):
    """A callable dict: what an lru_cache may call."""

    def __call__(self):
        return self


# -- R58a-1 / R58a-2: the lru_cache's referents drop every dict and every type ---------------

def _lru_calls(target, bump):
    f = functools.lru_cache(maxsize=0)(target)
    f.__wrapped__ = len     # (R57d-2's rebinding: the text must not need it)

    def change():
        bump(f())
        f.cache_clear()     # the statistics back to (0, 0, 0, 0)
    return f, change


@pytest.mark.state_modules()
def test_r58a_1_lru_calls_dict_subclass_change_seen():
    v, change = _lru_calls(_Cell(n=0), lambda d: d.__setitem__("n", d["n"] + 1))
    assert _seen(v, change)


@pytest.mark.state_modules()
def test_r58a_2_lru_calls_class_change_seen():
    cls = type("_C", (), {"n": 0})

    def bump(obj):
        type(obj).n += 1
    v, change = _lru_calls(cls, bump)
    assert _seen(v, change)


@pytest.mark.state_modules()
def test_r58a_control_dict_subclass_and_class_held_directly_seen():
    """The same two values held as an attribute, not through an lru_cache: read."""
    import types

    d, cls = _Cell(n=0), type("_C", (), {"n": 0})
    h = types.SimpleNamespace(d=d, c=cls)
    assert _seen(h, lambda: d.__setitem__("n", 1))
    assert _seen(h, lambda: setattr(cls, "n", 1))


@pytest.mark.state_modules()
def test_r58a_control_lru_calls_lambda_seen():
    cell = [0]
    v, change = _lru_calls(lambda: cell, lambda c: c.__setitem__(0, c[0] + 1))
    assert _seen(v, change)


# -- R58a-3: ``__slots__`` with ``"__dict__"`` (a managed dict: not in ``__basicsize__``) -----

@pytest.mark.state_modules()
def test_r58a_3_slot_with_dict_deleted_change_seen():
    class _S:
        __slots__ = ("n", "__dict__")

    n = _S.__dict__["n"]
    del _S.n
    v = _S()
    n.__set__(v, 0)
    assert _seen(v, lambda: n.__set__(v, 5))


@pytest.mark.state_modules()
def test_r58a_3_slot_count_with_managed_dict():
    """The measured cause (one slot and a managed dict counted as no slot) fixed: a dict kept
    before the object (a negative ``__dictoffset__``) takes no room in it."""
    from spec_lang.torch_frontend.value_text import _slot_count

    class _S:
        __slots__ = ("n", "__dict__")

    class _T:
        __slots__ = ("n", "__weakref__")
    assert _slot_count(_T) == 1
    assert _slot_count(_S) == 1


@pytest.mark.state_modules()
def test_r58a_control_slot_with_dict_kept_seen():
    class _S:
        __slots__ = ("n", "__dict__")

    v = _S()
    v.n = 0
    assert _seen(v, lambda: setattr(v, "n", 5))


# -- R58a-4: an lru_cache told by its type's ``__name__`` ------------------------------------

class _lru_cache_wrapper(io.StringIO):  # noqa: N801 -- the name is the attack
    currsize = 0

    def cache_info(self):
        return self


@pytest.mark.state_modules()
def test_r58a_4_lru_name_spoofed_stringio_change_seen():
    v = _lru_cache_wrapper()
    assert _seen(v, lambda: v.write("x"))


@pytest.mark.state_modules()
def test_r58a_control_stringio_subclass_seen():
    v = type("_T", (io.StringIO,), {})()
    assert _seen(v, lambda: v.write("x"))


# -- R58a-5: a namedtuple class in the train file's globals -----------------------------------

@pytest.mark.state_modules()
def test_r58a_5_namedtuple_class_readable():
    import collections

    assert _text(collections.namedtuple("Pair", "x y"))[1] is False


# -- a standard stream: what sys's own reading sees -------------------------------------------

@pytest.mark.state_modules("sys")
def test_r58a_control_stream_attribute_seen_through_sys(monkeypatch):
    """A number kept in an attribute of the object ``sys.stderr`` names is seen through
    ``sys``'s reading (its own attributes by ``_ident``), though the train file's global
    holding it is named only (a list changed in place is not: the in-place family)."""
    from spec_lang.torch_frontend.process_state import _process_state

    w = type("_W", (io.TextIOWrapper,), {})(io.BytesIO())
    w.count = 0
    monkeypatch.setattr(sys, "stderr", w)
    assert "<sys.stderr>" in _text(w)[0] and _text(w)[1] is False
    before = _process_state()["the module sys"]
    w.count = 1
    assert _process_state()["the module sys"] != before


# -- proves --------------------------------------------------------------------------------

def _prove(path: Path) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


@pytest.mark.slow
def test_r58a_1_prove_not_equivalent():
    assert _prove(ROUND / "r58a_01_lru_calls_dict_subclass_wrong.py") != 0


@pytest.mark.slow
def test_r58a_2_prove_not_equivalent():
    assert _prove(ROUND / "r58a_02_lru_calls_class_wrong.py") != 0


@pytest.mark.slow
def test_r58a_3_prove_not_equivalent():
    assert _prove(ROUND / "r58a_03_slot_with_dict_deleted_wrong.py") != 0


@pytest.mark.slow
def test_r58a_4_prove_not_equivalent():
    assert _prove(ROUND / "r58a_04_lru_name_spoofed_stringio_wrong.py") != 0


@pytest.mark.slow
def test_r58a_5_namedtuple_class_equivalent():
    assert _prove(ROUND / "r58a_05_namedtuple_class_right.py") == 0
