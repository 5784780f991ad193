"""Adversarial round 57b (``tests/adversarial/ATTEMPTS.md``, "Round 57b"): 69068ac (R57a-1,
R57a-3, R57a-2 fixed: dicts through ``dict``'s own methods, ``own_dict`` / ``module_dict``,
``issubclass(type(v), T)``), attacked by other routes.

Plans in ``plans/round57b/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``
(r57b_01..04 double their gradients from the second step on: step 1 w0 0.0 / step 2 w0
0.0058). The fast tests call ``step_state._Encoder`` directly (no process-state fingerprint);
the slow ones prove the plans.
"""

from __future__ import annotations

import array
import collections
import enum
import functools
import io
import random
import types
import weakref
from pathlib import Path

import pytest

from tests.adversarial.state_diff import encoder_seen as _seen
from tests.adversarial.state_diff import encoder_text as _text

ROUND = Path(__file__).resolve().parent / "plans" / "round57b"


class _Plain:
    pass


# -- R57b-1: a subclass of a C type _special reads by its C state: its __dict__ unread ------

def _attr_case(make):
    v = make()
    v.n = 0
    return v, lambda: setattr(v, "n", 1)


class _BA(bytearray):
    pass


class _AR(array.array):
    pass


class _WR(weakref.ref):
    pass


_TARGET = _Plain()


def _torch_generator():
    import torch

    class _TG(torch.Generator):
        pass
    return _TG()


def _rlock():
    import _thread

    class _RL(_thread.RLock):
        pass
    return _RL()


def _ndarray():
    np = pytest.importorskip("numpy")

    class _NA(np.ndarray):
        pass
    return np.zeros(2).view(_NA)


_R57B_1 = {
    "bytearray": lambda: _BA(b"x"),
    "array": lambda: _AR("b", [1]),
    "weakref": lambda: _WR(_TARGET),
    "torch.Generator": _torch_generator,
    "RLock": _rlock,
    "numpy.ndarray": _ndarray,
    "module not in sys.modules": lambda: types.ModuleType("r57b_ns"),
}


@pytest.mark.state_modules()
@pytest.mark.parametrize("kind", sorted(_R57B_1))
def test_r57b_1_c_type_subclass_attribute_seen(kind):
    v, change = _attr_case(_R57B_1[kind])
    assert _seen(v, change)


@pytest.mark.state_modules()
@pytest.mark.parametrize("kind", ["plain", "deque", "Future", "StringIO"])
def test_r57b_1_control_attribute_seen(kind):
    """Controls: the branches that do read ``_attrs``."""
    import torch

    class _DQ(collections.deque):
        pass

    class _FU(torch.futures.Future):
        pass

    class _SI(io.StringIO):
        pass
    make = {"plain": _Plain, "deque": _DQ, "Future": _FU, "StringIO": _SI}[kind]
    v = make()
    if kind == "Future":
        v.set_result(0)
    v, change = _attr_case(lambda: v)
    assert _seen(v, change)


# -- R57b-2: _special reads the value through the value's own methods (lies) ----------------

_FIXED = random.Random(0).getstate()


class _Rng(random.Random):
    def getstate(self):
        return _FIXED


class _SIo(io.StringIO):
    def getvalue(self):
        return ""

    def tell(self):
        return 0


class _DD(collections.defaultdict):
    @property
    def default_factory(self):
        return float


class _Part(functools.partial):
    @property
    def args(self):
        return (1,)


class _Quiet(dict):
    def items(self):
        return []


class _WCall(weakref.ref):
    def __call__(self):
        return None


class _E(enum.Enum):
    A = 1

    def __repr__(self):
        return "_E.A"


def _r57b_2(kind):
    if kind == "Random.getstate":
        v = _Rng(0)
        return v, v.random
    if kind == "StringIO.getvalue":
        v = _SIo()
        return v, lambda: v.write("x")
    if kind == "defaultdict.default_factory":
        v = _DD(float)
        return v, lambda: collections.defaultdict.default_factory.__set__(v, int)
    if kind == "partial.args":
        v = _Part(max, 1)
        return v, lambda: functools.partial.__setstate__(v, (max, (2,), None, None))
    if kind == "mappingproxy over dict subclass":
        d = _Quiet(n=0)
        return types.MappingProxyType(d), lambda: dict.__setitem__(d, "n", 1)
    if kind == "weakref.__call__":
        t = _Plain()
        t.n = 0
        v = _WCall(t)
        v.keep = t      # (a strong reference, so the referent lives)
        return v, lambda: setattr(t, "n", 1)
    v = _E.A              # Enum __repr__: its _value_ is skipped, repr is the subclass's

    def change():
        v._value_ = 7
    return v, change


_R57B_2 = ["Random.getstate", "StringIO.getvalue", "defaultdict.default_factory",
           "partial.args", "mappingproxy over dict subclass", "weakref.__call__",
           "Enum.__repr__"]


@pytest.mark.state_modules()
@pytest.mark.parametrize("kind", _R57B_2)
def test_r57b_2_own_method_lie_seen(kind):
    v, change = _r57b_2(kind)
    try:
        assert _seen(v, change)
    finally:
        if kind == "Enum.__repr__":
            _E.A._value_ = 1


# -- R57b-3: slots by getattr(cls, "__slots__") and getattr(v, name) ------------------------

class _Hidden:
    __slots__ = ("n",)


_Hidden.__slots__ = ()


class _Lying:
    __slots__ = ("n",)

    def __getattribute__(self, k):
        if k == "n":
            return 0
        return object.__getattribute__(self, k)


class _Slot:
    __slots__ = ("n",)


@pytest.mark.state_modules()
def test_r57b_3_slot_hidden_by_slots_reassigned_seen():
    v = _Hidden()
    v.n = 0
    assert _seen(v, lambda: setattr(v, "n", 1))


@pytest.mark.state_modules()
def test_r57b_3_slot_read_through_getattribute_seen():
    v = _Lying()
    _Lying.n.__set__(v, 0)
    assert _seen(v, lambda: _Lying.n.__set__(v, 5))


@pytest.mark.state_modules()
def test_r57b_3_control_plain_slot_seen():
    v = _Slot()
    v.n = 0
    assert _seen(v, lambda: setattr(v, "n", 1))


# -- proves --------------------------------------------------------------------------------

def _prove(path: Path) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


@pytest.mark.slow
def test_r57b_01_bytearray_subclass_counter_not_equivalent():
    assert _prove(ROUND / "r57b_01_counter_in_bytearray_subclass_attr_wrong.py") != 0


@pytest.mark.slow
def test_r57b_02_weakref_subclass_counter_not_equivalent():
    assert _prove(ROUND / "r57b_02_counter_in_weakref_subclass_attr_wrong.py") != 0


@pytest.mark.slow
def test_r57b_03_random_subclass_getstate_lie_not_equivalent():
    assert _prove(ROUND / "r57b_03_random_subclass_getstate_lies_wrong.py") != 0


@pytest.mark.slow
def test_r57b_04_slot_hidden_counter_not_equivalent():
    assert _prove(ROUND / "r57b_04_slot_hidden_by_slots_reassigned_wrong.py") != 0


@pytest.mark.slow
def test_r57b_06_plain_right_plan_equivalent():
    """A right plan (replicate, plain SGD): EQUIVALENT at 38b0b2a, UNKNOWN at 69068ac, EQUIVALENT
    again once ``lazy_globals`` exempts torch's cache (holding exactly torch's class)."""
    assert _prove(ROUND / "r57b_06_plain_optimizer_right.py") == 0


@pytest.mark.state_modules()
def test_r57b_4_generator_isinstance_miss_fills_torch_opaque_cache():
    """R57b-4's cause, pinned: ``torch.Generator``'s metaclass is ``OpaqueBaseMeta``, whose
    ``__instancecheck__`` miss fills ``torch._opaque_base._FakeScriptObject_cls`` (38b0b2a's
    ``isinstance(v, torch.Generator)`` in ``_special`` filled it on both sides; 69068ac's
    ``issubclass(type(v), ...)`` never does). Restores the cache afterwards."""
    import torch
    import torch._opaque_base as ob

    assert type(torch.Generator) is ob.OpaqueBaseMeta
    saved = ob._FakeScriptObject_cls
    try:
        ob._FakeScriptObject_cls = None
        assert not issubclass(_Plain, torch.Generator)
        assert ob._FakeScriptObject_cls is None
        assert not isinstance(_Plain(), torch.Generator)
        assert ob._FakeScriptObject_cls is not None
    finally:
        ob._FakeScriptObject_cls = saved


@pytest.mark.state_modules("torch._opaque_base")
def test_r57b_4_fix_torch_opaque_cache_exempt_only_holding_torchs_class():
    """The fix: ``torch._opaque_base._FakeScriptObject_cls`` filled by torch (None -> the class
    ``FakeScriptObject``) is no change; any other class put there is."""
    import torch._opaque_base as ob
    from torch._library.fake_class_registry import FakeScriptObject

    from tests.adversarial.state_diff import state_diff

    saved = ob._FakeScriptObject_cls
    try:
        ob._FakeScriptObject_cls = None
        assert state_diff(lambda: setattr(ob, "_FakeScriptObject_cls", FakeScriptObject),
                          lambda: setattr(ob, "_FakeScriptObject_cls", None)) == []
        other = type("FakeScriptObject", (), {})
        assert state_diff(lambda: setattr(ob, "_FakeScriptObject_cls", other),
                          lambda: setattr(ob, "_FakeScriptObject_cls", None)) == [
            "torch namespace torch._opaque_base"]
    finally:
        ob._FakeScriptObject_cls = saved
