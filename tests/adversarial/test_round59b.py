"""Adversarial round 59b (``tests/adversarial/ATTEMPTS.md``, "Round 59b"): 2ae7be0's
``value_text._part_text`` (a partial's exact-tuple arguments read with their items, a C bound
method with its ``__self__``, each level in the depth limit) attacked.

Plans in ``plans/round59b/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``.
The fast tests call ``process_state._process_state`` and ``state_changes`` around a SIGUSR1
handler (as ``test_round58h`` does) or ``value_text.object_text`` directly.
"""

from __future__ import annotations

import collections
import functools
import operator
import signal
import types
from pathlib import Path

import pytest

ROUND = Path(__file__).resolve().parent / "plans" / "round59b"


def _prove(path: Path) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


class _Box:
    def __init__(self) -> None:
        self.n = 0


def _handler(*a: object, **k: object) -> None:
    return None


_Cfg = collections.namedtuple("_Cfg", "box")


class _Tup(tuple):
    __slots__ = ()


def _signal_changes(handler, mutate) -> dict[str, str]:
    """``state_changes`` of the process state around ``mutate()`` with ``handler`` on SIGUSR1."""
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


def _seen(make) -> bool:
    """Whether ``box.n`` rebound is a change, the box reached only through ``make(box)``, the
    SIGUSR1 handler (a no-op step is checked to be no change first)."""
    box = _Box()
    handler = make(box)
    assert not _signal_changes(handler, lambda: None)
    return bool(_signal_changes(handler, lambda: setattr(box, "n", 1)))


# -- R59b-1: immutable holders other than an exact tuple (false accept: r59b_01, r59b_02) --------

@pytest.mark.state_modules()
def test_r59b_1_box_in_a_namedtuple_argument_seen():
    assert _seen(lambda b: functools.partial(_handler, _Cfg(b)))


@pytest.mark.state_modules()
def test_r59b_1_box_in_a_tuple_subclass_argument_seen():
    assert _seen(lambda b: functools.partial(_handler, _Tup((b,))))


@pytest.mark.state_modules()
def test_r59b_1_box_in_a_frozenset_argument_seen():
    assert _seen(lambda b: functools.partial(_handler, frozenset([b])))


@pytest.mark.state_modules()
def test_r59b_1_box_in_a_slice_argument_seen():
    assert _seen(lambda b: functools.partial(_handler, slice(b)))


@pytest.mark.state_modules()
def test_r59b_1_box_in_a_methodcaller_handler_seen():
    assert _seen(lambda b: operator.methodcaller("r59b", b))


@pytest.mark.state_modules()
def test_r59b_1_box_in_a_methodcaller_argument_seen():
    assert _seen(lambda b: functools.partial(_handler, operator.methodcaller("r59b", b)))


@pytest.mark.state_modules()
def test_r59b_1_box_under_a_staticmethod_handler_seen():
    assert _seen(lambda b: staticmethod(functools.partial(_handler, b)))


@pytest.mark.state_modules()
def test_r59b_1_control_exact_tuple_and_keyword_tuple_seen():
    """Control (2ae7be0's fix): an exact tuple argument, a partial inside a keyword's tuple."""
    assert _seen(lambda b: functools.partial(_handler, (b,)))
    assert _seen(lambda b: functools.partial(_handler, k=(1, functools.partial(_handler, b))))


@pytest.mark.slow
def test_r59b_1_namedtuple_prove_not_equivalent():
    assert _prove(ROUND / "r59b_01_signal_handler_namedtuple_arg_wrong.py") != 0


@pytest.mark.slow
def test_r59b_1_methodcaller_prove_not_equivalent():
    assert _prove(ROUND / "r59b_02_signal_handler_methodcaller_wrong.py") != 0


# -- R59b-2: a method resets the depth (R56f-2's cause): a 2-object cycle recurses (exit 3) ----

def _method_cycle(box: _Box) -> functools.partial:
    p = functools.partial(_handler)
    p.__setstate__((_handler, (types.MethodType(p, box),), {}, None))
    return p


@pytest.mark.state_modules()
def test_r59b_2_method_cycle_reads_without_error():
    from spec_lang.torch_frontend.value_text import object_text, release_kept

    try:
        text = object_text(_method_cycle(_Box()))
    finally:
        release_kept()
    assert text


@pytest.mark.slow
def test_r59b_2_method_cycle_prove_not_an_error():
    rc = _prove(ROUND / "r59b_03_signal_handler_method_cycle_crash.py")
    assert rc in (1, 2)


# -- controls: right plans stay EQUIVALENT -------------------------------------------------------

@pytest.mark.slow
def test_r59b_right_tuple_cfg_handler_equivalent():
    assert _prove(ROUND / "r59b_04_signal_handler_tuple_cfg_right.py") == 0
