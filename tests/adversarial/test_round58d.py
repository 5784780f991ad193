"""Adversarial round 58d (``tests/adversarial/ATTEMPTS.md``, "Round 58d"): 639e3c9's
``special_values`` (lru_cache by its type and referents, weakref callbacks, mappingproxy, the
namedtuple ``_tuplegetter``) and 8325057's ``refuse_held(collect=False)`` attacked.

Plans in ``plans/round58d/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``
(r58d_01, r58d_02 double their gradients from the second step on). The fast tests call
``step_state._Encoder`` directly.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

ROUND = Path(__file__).resolve().parent / "plans" / "round58d"


def _text(v) -> tuple[str, bool]:
    """``v``'s fingerprint text and whether it is marked unreadable."""
    from spec_lang.torch_frontend.step_state import _Encoder

    e = _Encoder({}, frozenset())
    t = e.enc(v)
    return t, e.unreadable


def _f(x=0):
    return x


class _Info(dict):
    """A callable dict: an lru_cache wrapper's own ``__dict__`` and its cache-info type, which
    zeroes ``n`` each time the wrapper's statistics are asked for."""

    def __call__(self, hits, misses, maxsize, currsize):
        self["n"] = 0
        return functools._CacheInfo(hits, misses, maxsize, currsize)  # noqa: SLF001


def _resetting_wrapper() -> tuple[object, _Info]:
    d = _Info(n=0)
    w = functools._lru_cache_wrapper(_f, 0, False, d)  # noqa: SLF001
    w.__dict__ = d
    return w, d


# -- R58d-1: cache_info() calls the wrapper's own cache-info type: user code in the fingerprint --

@pytest.mark.state_modules()
def test_r58d_1_lru_cache_info_type_counter_seen():
    w, d = _resetting_wrapper()
    t0, u0 = _text(w)
    d["n"] = 5                  # the step's counter
    t1, u1 = _text(w)
    assert t0 != t1 or u0 or u1


@pytest.mark.state_modules()
def test_r58d_1_fingerprint_leaves_the_value_alone():
    w, d = _resetting_wrapper()
    d["n"] = 5
    _text(w)
    assert d["n"] == 5


@pytest.mark.state_modules()
def test_r58d_1_cache_info_type_raising_is_never_called():
    """The fix reads the wrapper's C fields and never calls ``cache_info``: a cache-info type
    that would raise is read as what it is (here a function), nothing escapes."""
    w = functools._lru_cache_wrapper(_f, None, False, _f)  # noqa: SLF001 -- _f takes <= 1
    t, _ = _text(w)
    assert t.startswith("lru_cache(") and "_f" in t.split(",misses=")[1]


# -- R58d-2: the C-held typed flag is never read ---------------------------------------------

@pytest.mark.state_modules()
def test_r58d_2_lru_typed_flag_seen():
    info = functools._CacheInfo  # noqa: SLF001
    typed, untyped = (functools._lru_cache_wrapper(_f, None, t, info)  # noqa: SLF001
                      for t in (True, False))
    (a, ua), (b, ub) = _text(typed), _text(untyped)
    assert a != b or ua or ub


@pytest.mark.state_modules()
def test_r58d_2_decorated_typed_flag_seen_with_cache_parameters_rebound():
    typed = functools.lru_cache(typed=True)(_f)
    untyped = functools.lru_cache(typed=False)(_f)
    typed.cache_parameters = untyped.cache_parameters
    (a, ua), (b, ub) = _text(typed), _text(untyped)
    assert a != b or ua or ub


@pytest.mark.state_modules()
def test_r58d_control_decorated_typed_flag_seen_through_cache_parameters():
    """``functools.lru_cache`` keeps ``typed`` in its ``cache_parameters`` closure: read."""
    typed = functools.lru_cache(typed=True)(_f)
    untyped = functools.lru_cache(typed=False)(_f)
    assert _text(typed)[0] != _text(untyped)[0]


@pytest.mark.state_modules()
def test_r58d_control_hand_built_maxsize_seen():
    a, b = (functools._lru_cache_wrapper(_f, m, False, functools._CacheInfo)  # noqa: SLF001
            for m in (0, 1))
    assert _text(a)[0] != _text(b)[0]
    assert _text(a)[1] is False


# -- proves --------------------------------------------------------------------------------

def _prove(path: Path) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


@pytest.mark.slow
def test_r58d_1_prove_not_equivalent():
    assert _prove(ROUND / "r58d_01_lru_cache_info_type_resets_wrong.py") != 0


@pytest.mark.slow
def test_r58d_2_prove_not_equivalent():
    assert _prove(ROUND / "r58d_02_lru_typed_flag_swapped_wrong.py") != 0


# -- R58d-3: a weakref.finalize's arguments (its state is in the class's registry) ------------

def _noop(n):
    return None


class _Holder:
    """An object a finalizer can be attached to (weak-referenceable)."""


@pytest.mark.state_modules("weakref")
def test_r58d_3_finalize_replaced_with_other_args_seen():
    import weakref

    from spec_lang.torch_frontend.process_state import _process_state

    holder = _Holder()
    holder.fz = weakref.finalize(holder, _noop, 0)
    t0, p0 = _text(holder), _process_state()
    holder.fz.detach()
    holder.fz = weakref.finalize(holder, _noop, 1)
    t1, p1 = _text(holder), _process_state()
    holder.fz.detach()
    assert t0 != t1 or t0[1] or t1[1] or p0 != p1


@pytest.mark.state_modules("weakref")
def test_r58d_control_finalize_function_change_seen():
    """The finalizers pending are read by function: another function is a change."""
    import weakref

    from spec_lang.torch_frontend.process_state import _process_state

    holder = _Holder()
    holder.fz = weakref.finalize(holder, _noop, 0)
    p0 = _process_state()["finalizers pending"]
    holder.fz.detach()
    holder.fz = weakref.finalize(holder, _f, 0)
    p1 = _process_state()["finalizers pending"]
    holder.fz.detach()
    assert p0 != p1


@pytest.mark.slow
def test_r58d_3_prove_not_equivalent():
    assert _prove(ROUND / "r58d_03_finalize_args_counter_wrong.py") != 0


# -- R58d-4: a replaced parameter held only by a self-renewing garbage chain -------------------
# (a unit form with ``refuse_held`` under pytest is refused for a holder the collector does not
# see (pytest's own references): not a measure of the capture; the prove is)

@pytest.mark.slow
def test_r58d_4_prove_not_equivalent():
    assert _prove(ROUND / "r58d_04_stale_param_in_garbage_chain_wrong.py") != 0
