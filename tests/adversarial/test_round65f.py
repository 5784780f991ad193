"""Adversarial round 65f (``tests/adversarial/ATTEMPTS.md``, "Round 65f"): 72c55465
(``special_values.special_text`` reading a ``property`` by its accessors, a code object by
``_Encoder._code``, and numpy's C functions, ``numpy.ufunc`` / the array-function dispatcher,
by NAME when the numpy module their ``__module__`` names holds them under their ``__name__``;
``module_members.PrivateGlobals`` unwrapping up to 8 layers, reading nested private globals)
attacked. Plans in ``plans/round65f/`` (template r62d_01: the parallel step doubles its
gradients from step 2 on a flag, ``H["on"]`` set in ``parallelize``); the truth is ``python
tests/adversarial/torch4_truth.py FILE 2``.

R65f-1 (false accept, new with 72c55465's ``_ufunc_name``): "numpy holds it under its name" is
no proof the object is numpy's own: the train file makes a ``numpy.ufunc`` with
``numpy.frompyfunc`` over a closure that counts the steps (r65f_01), or an array-function
dispatcher with ``numpy._core.overrides.array_function_dispatch(..., module="numpy")`` over its
own implementation (r65f_02), and binds it in ``numpy``'s namespace under its ``__name__``; the
train-file global is then read as ``numpy.ufunc:numpy.<name>``, its Python function (held in
C, or as the dispatcher's implementation) never read: r65f_01 / r65f_02 EQUIVALENT, the truth
differing at step 2. Before, such a ufunc was "state in C" (UNKNOWN). (``numpy``'s own module
globals, read by ``process_state``, hold it by identity: unchanged.)
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.child_probe import run_child

TREE = Path(__file__).resolve().parents[2]
ROUND = Path(__file__).resolve().parent / "plans" / "round65f"

_REASONS = {
    "R65f-1": "R65f-1: special_values._ufunc_name reads a numpy.ufunc / array-function "
              "dispatcher by name when numpy's namespace holds it under its __name__; a "
              "frompyfunc ufunc or a train-file-made dispatcher the train file bound there is "
              "read by that name, the counter in its Python function unseen: r65f_01 / "
              "r65f_02 EQUIVALENT",
}

# a train-file-like value read by step_state's _Encoder before and after a call that changes
# the counter its Python function closes over; SETUP makes U, PUT binds it in numpy or not
_UNIT = """
import json, numpy
from spec_lang.torch_frontend.step_state import _Encoder, _text
def read(v):
    return _text(_Encoder({}, frozenset()), v)
def _make():
    n = 0
    def flag(x):
        nonlocal n
        n += 1
        return n
    return flag
SETUP
PUT
t0 = read(U)
U(0)
t1 = read(U)
print(json.dumps({"unreadable": t0.lstrip("~").startswith("!"), "changed": t0 != t1,
                  "text": t0[:120]}))
"""

_FROMPYFUNC = "U = numpy.frompyfunc(_make(), 1, 1)"
_DISPATCHER = ("from numpy._core.overrides import array_function_dispatch\n"
               "U = array_function_dispatch(lambda x: (x,), module='numpy')(_make())\n"
               "U.__name__ = 'r65f_flag'")


def _unit(setup: str, put: bool) -> dict:
    return run_child(_UNIT.replace("SETUP", setup).replace(
        "PUT", "numpy.__dict__[U.__name__] = U" if put else ""))


def _held(r: dict) -> bool:
    return r["unreadable"] or r["changed"]


def test_r65f_unit_control_frompyfunc_not_in_numpy_unreadable():
    r = _unit(_FROMPYFUNC, False)
    assert r["unreadable"], r


# (R65f-1: fixed, stop 65, special_values._NP_KNOWN)
def test_r65f_unit_frompyfunc_bound_in_numpy_read_by_name():
    r = _unit(_FROMPYFUNC, True)
    assert _held(r), r


# (R65f-1: fixed, stop 65, special_values._NP_KNOWN)
def test_r65f_unit_train_file_dispatcher_bound_in_numpy_read_by_name():
    r = _unit(_DISPATCHER, True)
    assert _held(r), r


def _prove(path: Path) -> int:
    from proofs.cli import prove_main  # noqa: PLC0415
    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


_WRONG = {
    "r65f_01_frompyfunc_ufunc_in_numpy_namespace_wrong.py": None,   # (R65f-1: fixed,
    "r65f_02_user_array_function_dispatcher_in_numpy_wrong.py": None,  # stop 65)
    "r65f_03_numpy_triu_attribute_counter_wrong.py": None,   # (held: numpy's globals)
}


@pytest.mark.slow
@pytest.mark.parametrize("plan", sorted(_WRONG))
def test_r65f_wrong_plan_not_equivalent(plan, request):
    if _WRONG[plan]:
        request.applymarker(pytest.mark.xfail(strict=True, reason=_REASONS[_WRONG[plan]]))
    assert _prove(ROUND / plan) != 0


@pytest.mark.slow
@pytest.mark.parametrize("path", [
    TREE / "examples" / "torch" / "mlp_ddp.py",
    TREE / "examples" / "torch" / "gpt2_ddp.py",
])
def test_r65f_examples_equivalent(path):
    assert _prove(path) == 0
