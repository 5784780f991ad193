"""Adversarial round 57c (``tests/adversarial/ATTEMPTS.md``, "Round 57c"): 9c00906
(``special_values.special_text``, ``value_text._slots``, R57b-1..4 fixed) attacked by other
routes.

Plans in ``plans/round57c/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``
(r57c_01..07 double their gradients from the second step on: step 1 w0 0.0 / step 2 w0
0.0058). The fast tests call ``step_state._Encoder`` directly (no process-state fingerprint);
the slow ones prove the plans. All six findings are fixed (the lead, after the round:
``special_values`` reads a Future, a ctypes pointer and an lru_cache through their C methods,
staticmethod/classmethod by their function, a file object and a ctypes structure, union,
array or pointer-valued simple type as unreadable; ``value_text._items`` an OrderedDict in its
own order, ``_slots`` refuses a class with fewer slot descriptors than slots; ``step_state``
a value with state in a C base other than ``object`` / ``SimpleNamespace`` as unreadable).
"""

from __future__ import annotations

import collections
import ctypes
import functools
import io
from pathlib import Path

import pytest

from tests.adversarial.state_diff import encoder_seen as _seen
from tests.adversarial.state_diff import encoder_text as _text

ROUND = Path(__file__).resolve().parent / "plans" / "round57c"


# -- R57c-1: an lru_cache's statistics (hits / misses) unread ---------------------------------

def _lru_maxsize0():
    f = functools.lru_cache(maxsize=0)(abs)
    return f, lambda: f(1)


# -- R57c-2: an OrderedDict's own order (its C linked list) unread ----------------------------

def _odict():
    d = collections.OrderedDict(a=1, b=2)
    return d, lambda: d.move_to_end("a")


# -- R57c-3: a C type with a __dict__ read by its attributes alone ----------------------------

def _staticmethod():
    v = staticmethod([0])
    return v, lambda: v.__func__.__setitem__(0, 1)


def _classmethod():
    v = classmethod([0])
    return v, lambda: v.__func__.__setitem__(0, 1)


def _textio():
    v = io.TextIOWrapper(io.BytesIO())
    return v, lambda: (v.write("x"), v.flush())


def _bufwriter():
    v = io.BufferedWriter(io.BytesIO())
    return v, lambda: (v.write(b"x"), v.flush())


# -- R57c-4: special_text still calls a subclass's own methods ---------------------------------

def _future_done_lie():
    import torch

    class _Fut(torch.futures.Future):
        def done(self):
            return False
    v = _Fut()
    return v, lambda: v.set_result(1)


def _future_value_lie():
    import torch

    class _Fut(torch.futures.Future):
        def value(self):
            return 0
    held = [0]
    v = _Fut()
    v.set_result(held)
    return v, lambda: held.__setitem__(0, 1)


def _pointer_contents_lie():
    class _P(ctypes.POINTER(ctypes.c_int)):
        _type_ = ctypes.c_int

        @property
        def contents(self):
            return ctypes.c_int(0)
    v = _P(ctypes.c_int(0))
    return v, lambda: v.__setitem__(0, 5)


def _pointer_bool_lie():
    class _P(ctypes.POINTER(ctypes.c_int)):
        _type_ = ctypes.c_int

        def __bool__(self):
            return False
    v = _P(ctypes.c_int(0))
    return v, lambda: v.__setitem__(0, 5)


# -- R57c-5: a slot whose member descriptor was taken out of its class ------------------------

def _slot_deleted():
    class _S:
        __slots__ = ("n",)
    d = _S.__dict__["n"]
    del _S.n
    v = _S()
    d.__set__(v, 0)
    return v, lambda: d.__set__(v, 1)


def _slot_replaced():
    class _S:
        __slots__ = ("n",)
    d = _S.__dict__["n"]
    _S.n = property(lambda self: 0)
    v = _S()
    d.__set__(v, 0)
    return v, lambda: d.__set__(v, 1)


# -- R57c-6: a ctypes Structure / Array / Union by its bytes: what its pointers point to unread --

def _struct_pointer():
    class _St(ctypes.Structure):
        _fields_ = [("p", ctypes.POINTER(ctypes.c_int))]
    v = _St(ctypes.pointer(ctypes.c_int(0)))
    return v, lambda: v.p.__setitem__(0, 5)


def _array_of_pointers():
    v = (ctypes.POINTER(ctypes.c_int) * 1)(ctypes.pointer(ctypes.c_int(0)))
    return v, lambda: v[0].__setitem__(0, 5)


_OPEN = {"R57c-1 lru maxsize=0 misses": _lru_maxsize0,
         "R57c-2 OrderedDict move_to_end": _odict,
         "R57c-3 staticmethod": _staticmethod, "R57c-3 classmethod": _classmethod,
         "R57c-3 TextIOWrapper": _textio, "R57c-3 BufferedWriter": _bufwriter,
         "R57c-4 Future done": _future_done_lie, "R57c-4 Future value": _future_value_lie,
         "R57c-4 pointer contents": _pointer_contents_lie,
         "R57c-4 pointer bool": _pointer_bool_lie,
         "R57c-5 slot descriptor deleted": _slot_deleted,
         "R57c-5 slot descriptor replaced": _slot_replaced,
         "R57c-6 Structure pointer field": _struct_pointer,
         "R57c-6 Array of pointers": _array_of_pointers}


@pytest.mark.state_modules()
@pytest.mark.parametrize("kind", sorted(_OPEN))
def test_r57c_change_seen(kind):
    v, change = _OPEN[kind]()
    assert _seen(v, change)


# -- controls: the same kinds' plain changes are seen -----------------------------------------

def _lru_holding():
    f = functools.lru_cache(maxsize=None)(abs)
    return f, lambda: f(1)


def _odict_content():
    d = collections.OrderedDict(a=1)
    return d, lambda: d.__setitem__("a", 2)


def _staticmethod_attr():
    v = staticmethod(abs)
    return v, lambda: setattr(v, "n", 1)


def _plain_future():
    import torch

    v = torch.futures.Future()
    return v, lambda: v.set_result(1)


def _plain_pointer():
    v = ctypes.pointer(ctypes.c_int(0))
    return v, lambda: v.__setitem__(0, 5)


_CONTROLS = {"lru holding": _lru_holding, "OrderedDict content": _odict_content,
             "staticmethod attribute": _staticmethod_attr, "Future": _plain_future,
             "pointer": _plain_pointer}


@pytest.mark.state_modules()
@pytest.mark.parametrize("kind", sorted(_CONTROLS))
def test_r57c_control_seen(kind):
    v, change = _CONTROLS[kind]()
    assert _seen(v, change)


# -- proves --------------------------------------------------------------------------------

def _prove(path: Path) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


_PLANS = ["r57c_01_counter_in_lru_cache_misses_wrong.py",
          "r57c_02_counter_in_ordereddict_order_wrong.py",
          "r57c_03_counter_in_staticmethod_func_wrong.py",
          "r57c_04_counter_in_textiowrapper_wrong.py",
          "r57c_05_future_subclass_done_lies_wrong.py",
          "r57c_06_slot_descriptor_deleted_wrong.py",
          "r57c_07_counter_behind_ctypes_struct_pointer_wrong.py"]


@pytest.mark.slow
@pytest.mark.parametrize("plan", _PLANS)
def test_r57c_wrong_plan_not_equivalent(plan):
    assert _prove(ROUND / plan) != 0
