"""Adversarial round 58b (``tests/adversarial/ATTEMPTS.md``, "Round 58b"): the value_text /
special_values family at 148ec35 (C-implemented stdlib objects, names the readers trust, module
digests) attacked.

Plans in ``plans/round58b/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``
(each plan doubles its gradients from the second step on). The fast tests call
``step_state._Encoder`` or ``process_state._process_state`` directly.
"""

from __future__ import annotations

import functools
import gc
import io
import itertools
import math
import subprocess
import sys
import types
import weakref
from pathlib import Path

import pytest

ROUND = Path(__file__).resolve().parent / "plans" / "round58b"
ROOT = Path(__file__).resolve().parents[2]


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


# -- R58b-1: a weak reference's callback (its closure) is never read -------------------------

class _Obj:
    pass


def _weakref_callback():
    o = _Obj()
    cell = [0]

    def cb(r):
        return cell
    wr = weakref.ref(o, cb)
    return wr, o, lambda: cell.__setitem__(0, 1)


@pytest.mark.state_modules()
def test_r58b_1_weakref_callback_change_seen():
    wr, _keep, change = _weakref_callback()
    assert _seen(wr, change)


@pytest.mark.state_modules()
def test_r58b_1_control_weakref_referent_attribute_seen():
    o = _Obj()
    o.n = 0
    wr = weakref.ref(o)
    assert _seen(wr, lambda: setattr(o, "n", 1))


# -- R58b-2: a mappingproxy's mapping read by its items only ---------------------------------

class _D(dict):
    pass


@pytest.mark.state_modules()
def test_r58b_2_mappingproxy_inner_attribute_seen():
    mp = types.MappingProxyType(_D())
    assert _seen(mp, lambda: setattr(gc.get_referents(mp)[0], "n", 1))


@pytest.mark.state_modules()
def test_r58b_2_mappingproxy_inner_default_factory_seen():
    import collections

    mp = types.MappingProxyType(collections.defaultdict(int))
    assert _seen(mp, lambda: setattr(gc.get_referents(mp)[0], "default_factory", list))


@pytest.mark.state_modules()
def test_r58b_2_control_mappingproxy_items_seen():
    d = {}
    mp = types.MappingProxyType(d)
    assert _seen(mp, lambda: d.update(a=1))


# -- R58b-3: special_text trusts a class's name and module ----------------------------------

class _lru_cache_wrapper(io.StringIO):  # noqa: N801 -- the name is the attack
    def cache_info(self):
        return functools._CacheInfo(0, 0, 0, 0)


@pytest.mark.state_modules()
def test_r58b_3_lru_named_stringio_seen():
    v = _lru_cache_wrapper()
    assert _seen(v, lambda: v.write("x"))


@pytest.mark.state_modules()
def test_r58b_3_control_plain_stringio_subclass_seen():
    class S(io.StringIO):
        pass
    v = S()
    assert _seen(v, lambda: v.write("x"))


class Logger(itertools.count):
    pass


Logger.__module__ = "logging"


@pytest.mark.state_modules()
def test_r58b_3_logging_named_count_seen():
    v = Logger()
    assert _seen(v, lambda: next(v))


# -- R58b-4: a user class whose __module__ names a trusted module ----------------------------

@pytest.mark.state_modules()
def test_r58b_4_class_forged_stdlib_module_seen():
    class Cnt:
        n = 0
    Cnt.__module__ = "collections"
    assert _seen(Cnt, lambda: setattr(Cnt, "n", 1))


@pytest.mark.state_modules()
def test_r58b_4_control_class_own_module_seen():
    class Cnt:
        n = 0
    assert _seen(Cnt, lambda: setattr(Cnt, "n", 1))


@pytest.mark.state_modules()
def test_r58b_4_object_forged_torch_module_seen():
    class W:
        pass
    W.__module__ = "torch.nn"
    w = W()
    w._n = 0
    assert _seen(w, lambda: setattr(w, "_n", 1))


# -- R58b-5: two module states, one digest (a key's text forged as a str key) -----------------

@pytest.mark.state_modules("math")
def test_r58b_5_module_key_text_collision_seen():
    from spec_lang.torch_frontend import process_state

    k = object()
    s = f"<key builtins.objectbuiltins.object@{id(k)}>"
    ns = vars(math)
    ns[k] = 0
    try:
        before = process_state._process_state()
        del ns[k]
        ns[s] = 0
        after = process_state._process_state()
    finally:
        ns.pop(k, None)
        ns.pop(s, None)
    assert before["the module math"] != after["the module math"]


@pytest.mark.state_modules("math")
def test_r58b_5_control_module_key_changed_seen():
    from spec_lang.torch_frontend import process_state

    ns = vars(math)
    ns["r58b_key"] = 0
    try:
        before = process_state._process_state()
        ns["r58b_key"] = 1
        after = process_state._process_state()
    finally:
        ns.pop("r58b_key", None)
    assert before["the module math"] != after["the module math"]


# -- end to end ---------------------------------------------------------------------------------

def _prove(plan: str) -> subprocess.CompletedProcess:
    code = ("import sys;from proofs.cli import prove_main;"
            "sys.exit(prove_main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-c", code, "--torch", str(ROUND / plan),
                           "--jobs", "1", "--no-check"], cwd=ROOT, capture_output=True,
                          text=True, check=False)


_WRONG = ["r58b_01_weakref_callback_closure_wrong.py",
          "r58b_02_module_key_text_collision_wrong.py",
          "r58b_03_class_forged_stdlib_module_wrong.py",
          "r58b_04_lru_named_stringio_wrong.py"]


@pytest.mark.slow
@pytest.mark.parametrize("plan", _WRONG)
def test_r58b_wrong_plan_not_equivalent(plan):
    r = _prove(plan)
    assert r.returncode != 0, r.stdout[-2000:]
