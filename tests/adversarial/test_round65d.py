"""Adversarial round 65d (``tests/adversarial/ATTEMPTS.md``, "Round 65d"): 7a030dfd (R65c-1's
fix: ``process_state``'s ``global_text`` appends ``deep_text`` of a FUNCTION whose globals are
no loaded module's namespace; the ``_Encoder``'s refresh on a miss; ``private_globals``' key
order; R64d-2's exemption of a builtin / library bound method a library file's import
registered) attacked. Plans in ``plans/round65d/`` (template r62d_01 / r65c_01: the parallel
step doubles its gradients from step 2 on a flag); the truth is
``python tests/adversarial/torch4_truth.py FILE 2``.

R65d-1 (false accept, R65c-1's fix one level down): the fix reads a foreign-globals function's
globals only when another module's global IS the function (``type(v) is FunctionType``); a
``functools.partial`` of it or a bound method of it (``types.MethodType``), which
``object_text`` reads by its parts (the function by the identities of its parts), is read
without its globals (r65d_01, r65d_02 EQUIVALENT). (The same function in a list, dict, an
object's attribute, a class attribute, ``lru_cache`` or ``staticmethod``: the in-place family,
R11-5 / R56f-4, unit forms only.)
R65d-2 (false accept, the other loop of ``_read_process_state``): the same function kept in a
torch module (``torch.utils.data.r65d_flag``): torch's modules are read by ``_ident`` of each
global, the fix lives in the other-modules loop only (r65d_03 EQUIVALENT).
R65d-3 (false accept, older: not from 7a030dfd): a step that imports a library file once more
each step under a name never imported before (``importlib._bootstrap._load``, kept in
``sys.modules``) counts the copies: every new module, and what its import registers, is no
change (r65d_05 with ``fnmatch.py``; r65d_04 with ``PIL/Image.py``, whose builtin exit callback
R64d-2's exemption now also passes; both EQUIVALENT).
R65d-4 (false refusal): a right plan (mlp_ddp) whose train_step imports matplotlib / PIL / rich
/ tqdm lazily and logs a namedtuple built by an exec-made helper: UNKNOWN ("the parallel step
changes the global Stat": r65d_07; r65d_06 keeping the exec dict as a global: "cannot read the
global _NS").
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.child_probe import run_child

TREE = Path(__file__).resolve().parents[2]
ROUND = Path(__file__).resolve().parent / "plans" / "round65d"

_REASONS = {
    "R65d-1": "R65d-1: a functools.partial / bound method of a function whose globals are no "
              "module's, kept as another module's attribute, is read by object_text without "
              "those globals (R65c-1's fix covers a bare function only): r65d_01, r65d_02 "
              "EQUIVALENT",
    "R65d-2": "R65d-2: a function whose globals are no module's, kept in a torch module, is "
              "read by _ident only (R65c-1's fix is in the other-modules loop): r65d_03 "
              "EQUIVALENT",
    "R65d-3": "R65d-3: a library file imported again each step under a fresh name (kept in "
              "sys.modules) is no change; the step counts the copies: r65d_04, r65d_05 "
              "EQUIVALENT",
    "R65d-4": "R65d-4: right plan with lazy plotting imports in the step and a namedtuple / "
              "exec-made helper: UNKNOWN (r65d_06: cannot read the global _NS; r65d_07: the "
              "parallel step changes the global Stat)",
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
SETUP
s0 = _process_state([])
CALL
s1 = _process_state([])
print(json.dumps(sorted(state_changes(s0, s1))))
"""


def _unit(setup: str, call: str) -> str:
    return _UNIT.replace("SETUP", setup).replace("CALL", call)


@pytest.mark.state_modules()
def test_r65d_unit_control_bare_function_seen():
    # R65c-1's fix: the bare function as json's / fnmatch's attribute is read with its globals
    assert run_child(_unit("HOST.r65d = f", "HOST.r65d()")) != []


@pytest.mark.state_modules()
# (R65d-1: fixed, stop 65, module_members.PrivateGlobals)
def test_r65d_unit_partial_of_foreign_fn_in_other_module():
    assert run_child(_unit("HOST.r65d = functools.partial(f)", "HOST.r65d()")) != []


@pytest.mark.state_modules()
# (R65d-1: fixed, stop 65, module_members.PrivateGlobals)
def test_r65d_unit_bound_method_of_foreign_fn_in_other_module():
    assert run_child(_unit("HOST.r65d = types.MethodType(f, json.JSONDecoder())",
                           "HOST.r65d()")) != []


@pytest.mark.state_modules()
# (R65d-2: fixed, stop 65, module_members.PrivateGlobals)
def test_r65d_unit_foreign_fn_in_torch_module():
    assert run_child(_unit("import torch.utils.data as TM; TM.r65d = f", "TM.r65d()")) != []


_COPY = ("import importlib.util\n"
         "def copy(k):\n"
         "    spec = importlib.util.spec_from_file_location(f'r65d_fnm{k}', HOST.__file__)\n"
         "    importlib._bootstrap._load(spec)\n")


@pytest.mark.state_modules()
# (R65d-3: fixed, stop 66, registry_state.file_copies)
def test_r65d_unit_library_file_loaded_again_under_fresh_name_seen():
    assert run_child(_unit(_COPY + "copy(0)", "copy(1)")) == \
        ["a module loaded from a file another loaded module came from: r65d_fnm1"]


@pytest.mark.state_modules()
def test_r65d_unit_control_lazy_import_of_new_module_no_change():
    # a module first imported in the step, from a file no module came from: no change
    assert run_child(_unit("", "import fractions, colorsys")) == []


def _prove(path: Path) -> int:
    from proofs.cli import prove_main  # noqa: PLC0415
    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


_WRONG = {
    "r65d_01_partial_of_exec_fn_in_stdlib_module_wrong.py": None,   # (R65d-1, R65d-2: fixed,
    "r65d_02_bound_method_of_exec_fn_in_stdlib_module_wrong.py": None,  # stop 65)
    "r65d_03_exec_fn_in_torch_module_wrong.py": None,
    "r65d_04_fresh_pil_image_copy_per_step_wrong.py": None,   # (R65d-3: fixed, stop 66,
    "r65d_05_fresh_fnmatch_copy_per_step_wrong.py": None,     # registry_state.file_copies)
}


@pytest.mark.slow
@pytest.mark.parametrize("plan", sorted(_WRONG))
def test_r65d_wrong_plan_not_equivalent(plan, request):
    if _WRONG[plan]:
        request.applymarker(pytest.mark.xfail(strict=True, reason=_REASONS[_WRONG[plan]]))
    assert _prove(ROUND / plan) != 0


_RIGHT = {
    "r65d_06_lazy_plotting_imports_exec_helper_right.py": None,   # (R65d-4: fixed, stop 65:
    "r65d_07_lazy_imports_exec_helper_local_ns_right.py": None,   # namespace packages; an
    # exec namespace's __builtins__ by name)
    "r65d_08_exec_helper_namedtuple_no_lazy_imports_right.py": None,   # (r65d_07 less the imports)
}


@pytest.mark.slow
@pytest.mark.parametrize("plan", sorted(_RIGHT))
def test_r65d_right_plan_equivalent(plan, request):
    if _RIGHT[plan]:
        request.applymarker(pytest.mark.xfail(strict=True, reason=_REASONS[_RIGHT[plan]]))
    assert _prove(ROUND / plan) == 0


@pytest.mark.slow
@pytest.mark.parametrize("path", [
    TREE / "examples" / "torch" / "mlp_ddp.py",
    TREE / "examples" / "torch" / "gpt2_ddp.py",
])
def test_r65d_examples_equivalent(path):
    assert _prove(path) == 0
