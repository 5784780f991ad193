"""Adversarial round 65e (``tests/adversarial/ATTEMPTS.md``, "Round 65e"): 713c32a2
(``module_members.PrivateGlobals`` reading a foreign-globals function a module holds, as
itself, a bound method's ``__func__`` or a ``partial``'s func; the ``_Encoder`` keeping what
``seen`` names alive; namespace packages made by an import; builtins' dict by name) attacked.
Plans in ``plans/round65e/`` (template r65d_01 / r62d_01: the parallel step doubles its
gradients from step 2 on a flag counted in an ``exec``-made function's private globals); the
truth is ``python tests/adversarial/torch4_truth.py FILE 2``.

R65e-1 (false accept): ``module_members._function_of`` is documented "up to 3 unwraps" but
its loop tests ``FunctionType`` before unwrapping, three times: a function under three layers
(``MethodType(MethodType(MethodType(f, 1), 2), 3)``, or ``partial(MethodType(MethodType(f, 1),
2))``) is not found and its globals are not read (r65e_01 EQUIVALENT).
R65e-2 (false accept): ``process_state``'s ``global_text`` returns ``dunder_text`` (identity)
for a ``MODULE_DUNDERS`` key before ``PrivateGlobals.text`` is appended: the function kept as
``json.__doc__`` (or ``__cached__``) is read without its globals (r65e_02 EQUIVALENT).
R65e-3 (false accept): ``PrivateGlobals.text`` reads the private globals' values with
``value_text._global_text``, which reads a function by its parts, never its globals: a
foreign-globals function held in another's private globals (outer -> inner -> counter) is not
read with its own (r65e_03 EQUIVALENT).
R65e-4 (false refusal, R64d-3's full read in ``step_state``, not from 713c32a2): a
``sympy.lambdify``'d function as a train-file global: its private namespace holds numpy's
ufuncs / array-function dispatchers (state in C): "cannot read the global SCHEDULE" (r65e_04).
R65e-5 (false refusal, older: 7a030dfd too): a ``typing.NamedTuple`` class as a train-file
global, instantiated in the step: "cannot read the global Stat" (r65e_07: mlp_ddp plus the
class only; r65e_05); an ``_Encoder`` outside the capture reads it (not diagnosed).
R65e-6 (false refusal, not checked at a baseline): a ``jinja2.Template`` as a train-file
global rendered in the step: "cannot read the global TEMPLATE" (``property`` objects, state in
C; r65e_06).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.child_probe import run_child

TREE = Path(__file__).resolve().parents[2]
ROUND = Path(__file__).resolve().parent / "plans" / "round65e"

_REASONS = {
    "R65e-1": "R65e-1: module_members._function_of finds a function under two wrappers only "
              "(documented: three): three bound methods / a partial of two methods of an "
              "exec-made function kept in json are read without its globals: r65e_01 "
              "EQUIVALENT",
    "R65e-2": "R65e-2: process_state.global_text reads a MODULE_DUNDERS key by dunder_text "
              "before PrivateGlobals.text: an exec-made function kept as json.__doc__ is read "
              "without its globals: r65e_02 EQUIVALENT",
    "R65e-3": "R65e-3: PrivateGlobals.text reads private globals with _global_text, which "
              "reads a foreign-globals function there without its own globals: r65e_03 "
              "EQUIVALENT",
    "R65e-4": "R65e-4 (remaining, a known false refusal): a functools.singledispatch function "
              "called in the step fills its dispatch cache (a WeakKeyDictionary in a closure "
              "cell): 'the step changes the global describe' (sympy's lambdify namespace, "
              "numpy's C functions: fixed, stop 65)",
    "R65e-5": "R65e-5 (remaining): as R65e-4, the singledispatch cache (the NamedTuple's "
              "ForwardRef code object: fixed, stop 65)",
    "R65e-6": "R65e-6 (remaining): as R65e-4, the singledispatch cache (jinja2's property "
              "objects: fixed, stop 65)",
}

_UNIT = """
import json, sys, functools, types, torch
from spec_lang.torch_frontend.process_state import _process_state
from spec_lang.torch_frontend.step_state import state_changes
import fnmatch as HOST
g = {"n": 0}
exec("def flag(*a):\\n    global n\\n    n += 1\\n    return n\\n", g)
f = g["flag"]
del g
M = types.MethodType
SETUP
s0 = _process_state([])
CALL
s1 = _process_state([])
print(json.dumps(sorted(state_changes(s0, s1))))
"""


def _unit(setup: str, call: str) -> list[str]:
    return run_child(_UNIT.replace("SETUP", setup).replace("CALL", call))


def _seen(changes: list[str]) -> bool:
    return "the module fnmatch" in changes


@pytest.mark.state_modules()
def test_r65e_unit_control_two_methods_seen():
    assert _seen(_unit("HOST.r65e = M(M(f, 1), 2)", "HOST.r65e()"))


@pytest.mark.state_modules()
# (R65e-1: fixed, stop 65, module_members.PrivateGlobals)
def test_r65e_unit_three_methods_of_foreign_fn():
    assert _seen(_unit("HOST.r65e = M(M(M(f, 1), 2), 3)", "HOST.r65e()"))


@pytest.mark.state_modules()
# (R65e-1: fixed, stop 65, module_members.PrivateGlobals)
def test_r65e_unit_partial_of_two_methods_of_foreign_fn():
    assert _seen(_unit("HOST.r65e = functools.partial(M(M(f, 1), 2))", "HOST.r65e()"))


@pytest.mark.state_modules()
# (R65e-2: fixed, stop 65, module_members.PrivateGlobals)
def test_r65e_unit_foreign_fn_as_module_doc():
    assert _seen(_unit("HOST.__doc__ = f", "HOST.__doc__()"))


@pytest.mark.state_modules()
# (R65e-3: fixed, stop 65, module_members.PrivateGlobals)
def test_r65e_unit_foreign_fn_in_foreign_globals():
    assert _seen(_unit(
        "g2 = {'inner': f}\nexec('def outer(*a):\\n    return inner(*a)\\n', g2)\n"
        "HOST.r65e = g2['outer']\ndel g2", "HOST.r65e()"))


def _prove(path: Path) -> int:
    from proofs.cli import prove_main  # noqa: PLC0415
    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


_WRONG = {
    "r65e_01_triple_method_of_exec_fn_in_stdlib_module_wrong.py": None,
    "r65e_02_exec_fn_as_stdlib_module_doc_wrong.py": None,
    "r65e_03_exec_fn_nested_in_private_globals_wrong.py": None,
}


@pytest.mark.slow
@pytest.mark.parametrize("plan", sorted(_WRONG))
def test_r65e_wrong_plan_not_equivalent(plan, request):
    if _WRONG[plan]:
        request.applymarker(pytest.mark.xfail(strict=True, reason=_REASONS[_WRONG[plan]]))
    assert _prove(ROUND / plan) != 0


_RIGHT = {
    "r65e_04_attrs_jinja_sympy_singledispatch_argparse_right.py": "R65e-4",
    "r65e_05_attrs_jinja_singledispatch_argparse_no_sympy_right.py": "R65e-5",
    "r65e_06_attrs_jinja_singledispatch_argparse_no_namedtuple_right.py": "R65e-6",
    "r65e_07_typing_namedtuple_only_right.py": None,     # (fixed, stop 65: code objects)
}


@pytest.mark.slow
@pytest.mark.parametrize("plan", sorted(_RIGHT))
def test_r65e_right_plan_equivalent(plan, request):
    if _RIGHT[plan]:
        request.applymarker(pytest.mark.xfail(strict=True, reason=_REASONS[_RIGHT[plan]]))
    assert _prove(ROUND / plan) == 0


@pytest.mark.slow
@pytest.mark.parametrize("path", [
    TREE / "examples" / "torch" / "mlp_ddp.py",
    TREE / "examples" / "torch" / "gpt2_ddp.py",
])
def test_r65e_examples_equivalent(path):
    assert _prove(path) == 0
