"""Adversarial round 65b (``tests/adversarial/ATTEMPTS.md``, "Round 65b"): stop 64's deep-read
changes (a loaded module met by name only; a function's private globals once; class and
function names as text) and the lazy torch namespaces attacked. Plans in ``plans/round65b/``
(template r62d_01: the parallel step doubles its gradients from step 2 on a flag); the truth is
``python tests/adversarial/torch4_truth.py FILE 2``.

R65b-1 (false accept): a ``types.ModuleType`` the train file makes under its own module name
(``__name__``) and puts in ``sys.modules`` under that name in ``build_model`` (the load pops the
real train module's entry). A train-file global holding it is read by name (it *is* the loaded
module of that name); ``process_state`` skips every ``sys.modules`` entry whose key is a user
module's name (the user modules are read through their module objects, not this one): its
globals are read nowhere, an int counter in it is unseen (r65b_01 EQUIVALENT).
R65b-2 (false accept): a module the train file makes and puts in ``sys.modules`` as
``torch.ops.r65b`` (the ``_LAZY_NAMESPACES`` prefix): ``process_state`` skips it entirely, a
train-file global holding it is read by name; the step rebinds its function global from one
train-file function to another (r65b_02 EQUIVALENT). A plain ``torch.*`` name would read the
rebinding (a function by its name and code) and mark the user's code.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.child_probe import run_child

TREE = Path(__file__).resolve().parents[2]
ROUND = Path(__file__).resolve().parent / "plans" / "round65b"

_REASONS = {
    "R65b-1": "R65b-1: a ModuleType made by the train file under its own __name__ and put in "
              "sys.modules under that name: read by name where held, skipped by process_state "
              "as a user module's name: its globals are read nowhere (r65b_01 EQUIVALENT)",
    "R65b-2": "R65b-2: a module the train file puts in sys.modules as torch.ops.r65b (a lazy "
              "namespace prefix) is skipped by process_state and read by name where held: "
              "its function global rebound by the step is unseen (r65b_02 EQUIVALENT)",
}

_UNIT = """
import json, sys, types
from spec_lang.torch_frontend.process_state import _process_state
from spec_lang.torch_frontend.step_state import state_changes
def _off(): return False
def _on(): return True
NAME = sys.argv[1]
M = types.ModuleType(NAME)
M.n = 0
M.f = _off
sys.modules[NAME] = M
user = [NAME] if sys.argv[2] == "user" else []
ids = frozenset()       # (the user module of that name is another object: the train file's)
s0 = _process_state(user, user_ids=ids)
M.n += 1
M.f = _on
s1 = _process_state(user, user_ids=ids)
print(json.dumps(sorted(state_changes(s0, s1))))
"""


@pytest.mark.state_modules()
def test_r65b_unit_control_plain_module_seen():
    assert run_child(_UNIT, "r65b_state", "none") != []


@pytest.mark.state_modules()
def test_r65b_unit_module_under_user_name():      # (R65b-1: fixed, stop 65)
    # the step_state reading of the user module goes through the real module object, not
    # this one: process_state is the only reader of sys.modules[NAME] and it skips it
    assert run_child(_UNIT, "_shardproof_torch_r65b", "user") != []


@pytest.mark.state_modules()
def test_r65b_unit_torch_ops_module():            # (R65b-2: fixed, stop 65)
    assert run_child(_UNIT, "torch.ops.r65b", "none") != []


def _prove(path: Path) -> int:
    from proofs.cli import prove_main  # noqa: PLC0415
    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


_WRONG = {
    "r65b_01_module_under_train_name_wrong.py": None,   # (R65b-1, R65b-2: fixed, stop 65:
    "r65b_02_torch_ops_module_fn_wrong.py": None,       # process_state, op_namespaces)
}


@pytest.mark.slow
@pytest.mark.parametrize("plan", sorted(_WRONG))
def test_r65b_wrong_plan_not_equivalent(plan, request):
    if _WRONG[plan]:
        request.applymarker(pytest.mark.xfail(strict=True, reason=_REASONS[_WRONG[plan]]))
    assert _prove(ROUND / plan) != 0


@pytest.mark.slow
@pytest.mark.parametrize("path", [
    ROUND / "r65b_03_aten_ops_right.py",
    TREE / "examples" / "torch" / "mlp_ddp.py",
    TREE / "examples" / "torch" / "gpt2_ddp.py",
])
def test_r65b_right_plans_and_examples_equivalent(path):
    assert _prove(path) == 0
