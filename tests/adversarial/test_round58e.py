"""Adversarial round 58e (``tests/adversarial/ATTEMPTS.md``, "Round 58e"): 3343a28's lru_cache
wrapper read by its C fields, ``weakref.finalize`` read by its registry entry, "finalizers
pending" with arguments and ``refuse_held``'s ``__del__`` holders; 9ce3a4e's
``_trusted_class``, ``_Entries`` and the model's class chain entries, attacked.

Plans in ``plans/round58e/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``.
The fast tests call ``step_state._Encoder`` and ``process_state._c_state`` directly.
"""

from __future__ import annotations

import weakref
from pathlib import Path

import pytest

from spec_lang.torch_frontend.value_text import UNREADABLE

ROUND = Path(__file__).resolve().parent / "plans" / "round58e"


def _text(v) -> tuple[str, bool]:
    """``v``'s fingerprint text (this module's classes the user's) and its unreadable mark."""
    from spec_lang.torch_frontend.step_state import _Encoder

    e = _Encoder({}, frozenset(), frozenset({__name__}))
    t = e.enc(v)
    return t, e.unreadable


def _noop(n):
    return None


class _Holder:
    """An object a finalizer can be attached to (weak-referenceable)."""


def _pending() -> str:
    from spec_lang.torch_frontend.process_state import _c_state

    return _c_state(False)["finalizers pending"]


# -- R58e-1: a weakref.finalize subclass registering in its own class's _registry ------------

def _finalize_subclass() -> type:
    class Fin(weakref.finalize):    # local: read through its objects only
        _registry: dict = {}

    return Fin


@pytest.mark.state_modules("weakref")
def test_r58e_1_finalize_subclass_own_registry_args_seen():
    fin = _finalize_subclass()
    holder = _Holder()
    holder.fz = fin(holder, _noop, 0)
    t0, p0 = _text(holder), _pending()
    fin._registry[holder.fz].args = (1,)     # the step's counter, in the registered _Info
    t1, p1 = _text(holder), _pending()
    holder.fz.detach()
    assert t0 != t1 or t0[1] or t1[1] or p0 != p1


@pytest.mark.state_modules("weakref")
def test_r58e_control_exact_finalize_args_in_place_seen():
    """An exact ``weakref.finalize`` is read by its registry entry: its ``_Info.args``
    rebound in place is a change of the object's text and of "finalizers pending"."""
    holder = _Holder()
    holder.fz = weakref.finalize(holder, _noop, 0)
    t0, p0 = _text(holder), _pending()
    weakref.finalize._registry[holder.fz].args = (1,)  # noqa: SLF001
    t1, p1 = _text(holder), _pending()
    holder.fz.detach()
    assert t0[0] != t1[0] and p0 != p1


@pytest.mark.slow
def test_r58e_1_prove_not_equivalent():
    assert _prove(ROUND / "r58e_01_finalize_subclass_own_registry_wrong.py") != 0


# -- R58e-2: the finalize registry rebound to a dict subclass whose items() hides one --------

class _Registry(dict):
    """Hides the finalizers of :func:`_noop` from ``items()`` (the train file's code)."""

    def items(self):
        return [(k, i) for k, i in dict.items(self) if i.func is not _noop]


@pytest.mark.state_modules("weakref")
def test_r58e_2_registry_items_cannot_hide_a_finalizer():
    saved = weakref.finalize._registry  # noqa: SLF001
    weakref.finalize._registry = _Registry(saved)  # noqa: SLF001
    try:
        holder = _Holder()
        fz = weakref.finalize(holder, _noop, 0)
        p0 = _pending()
        dict.__getitem__(weakref.finalize._registry, fz).args = (1,)  # noqa: SLF001
        p1 = _pending()
        fz.detach()
    finally:
        weakref.finalize._registry = saved  # noqa: SLF001 -- every finalizer made since: none
    assert p0 != p1 or p0.startswith(UNREADABLE)     # (UNREADABLE: reported, UNKNOWN)


@pytest.mark.slow
def test_r58e_2_prove_not_equivalent():
    assert _prove(ROUND / "r58e_02_finalize_registry_items_hides_wrong.py") != 0


# -- proves --------------------------------------------------------------------------------

def _prove(path: Path) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


# -- R58e-4: a sys.modules key that is not a string ends the fingerprint ---------------------

@pytest.mark.state_modules()
def test_r58e_4_non_str_sys_modules_key_does_not_crash_the_fingerprint():
    """``_read_process_state`` sorts ``sys.modules.items()`` by key: a tuple key beside the
    str ones raises ``TypeError`` (no verdict, exit 3) even when only the named modules are
    read."""
    import sys
    import types

    from spec_lang.torch_frontend.process_state import _process_state

    key = ("r58e_module",)
    sys.modules[key] = types.ModuleType("r58e_module")
    try:
        state = _process_state()
    finally:
        del sys.modules[key]
    assert "finalizers pending" in state


# -- R58e-5: "finalizers pending" reads a registered _Info's args through its class -----------

class _ArgsInfo:
    """A finalize ``_Info`` whose ``args`` is a property: a constant, the real ones kept in
    ``_args`` (``finalize.__init__`` sets ``info.args``, the setter keeps them)."""

    __slots__ = ("weakref", "func", "_args", "kwargs", "atexit", "index")
    calls = [0]

    @property
    def args(self):
        _ArgsInfo.calls[0] += 1
        return (0,)

    @args.setter
    def args(self, v):
        self._args = v


@pytest.mark.state_modules("weakref")
def test_r58e_5_finalize_info_args_property_not_run_nor_hiding():
    class Fin(weakref.finalize):
        __slots__ = ()
        _Info = _ArgsInfo

    holder = _Holder()
    fz = Fin(holder, _noop, 0)
    before = _ArgsInfo.calls[0]
    p0 = _pending()
    weakref.finalize._registry[fz]._args = (1,)  # noqa: SLF001 -- the step's counter
    p1 = _pending()
    calls = _ArgsInfo.calls[0] - before
    fz.detach()
    assert calls == 0 and (p0 != p1 or p0.startswith(UNREADABLE))


# -- R58e-3: a replaced parameter in garbage that a gc callback rebuilds (no __del__) ----------
# (like R58d-4, a unit form under pytest meets pytest's own references: the prove is the test)

@pytest.mark.slow
def test_r58e_3_prove_not_equivalent():
    assert _prove(ROUND / "r58e_03_stale_param_garbage_rebuilt_by_gc_callback_wrong.py") != 0


@pytest.mark.slow
def test_r58e_4_prove_right_plan_equivalent():
    assert _prove(ROUND / "r58e_05_non_str_sys_modules_key_right.py") == 0


# -- right plans -------------------------------------------------------------------------------

@pytest.mark.slow
def test_r58e_right_lru_finalize_torch_class_held_equivalent():
    assert _prove(ROUND / "r58e_04_lru_finalize_torch_class_held_right.py") == 0
