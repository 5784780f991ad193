"""Adversarial round 62a (``tests/adversarial/ATTEMPTS.md``, "Round 62a"): 1257386e (round 61d
fixed: C getters for torch's and numpy's settings, logging by identity, ``sys.modules``
rebound refused, ``print`` may be wrapped) attacked. Plans in ``plans/round62a/`` (template
r61d_01: the parallel step doubles its gradients from step 2 on a flag); the truth is
``python tests/adversarial/torch4_truth.py FILE 2``.

The unit form runs the plan's code (from its ``H = {}`` line: what it does at import, and the
flag) in a child interpreter of its own between two ``_process_state`` fingerprints
(``child_probe.patch_flags``).
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from tests.adversarial.child_probe import patch_flags, plan_flag_src

TREE = Path(__file__).resolve().parents[2]
ROUND = Path(__file__).resolve().parent / "plans" / "round62a"

MODE = "r62a_01_function_mode_counter_wrong.py"
HOOKS = "r62a_02_saved_hooks_counter_wrong.py"
DISPATCH = "r62a_04_dispatch_mode_counter_wrong.py"


@functools.lru_cache(maxsize=None)
def _probe(entered: bool, plan: str = MODE, call: str = "_enter()") -> dict:
    # entered: the plan's import-time call made (the plan as written); not: the control (no
    # mode / hooks, the flag finds none: False, False); each in a child of its own
    src = plan_flag_src(ROUND / plan, None if entered else call)
    return patch_flags("r62a", {"p": src})["p"]


def _hooks(entered: bool) -> dict:
    return _probe(entered, HOOKS, "_push()")


def _dispatch(entered: bool) -> dict:
    return _probe(entered, DISPATCH, "_enter()")


@pytest.mark.state_modules()
def test_r62a_1_flag_tells_step_2_from_step_1():
    assert (_probe(True)["flag1"], _probe(True)["flag2"]) == (False, True)
    assert (_probe(False)["flag1"], _probe(False)["flag2"]) == (False, False)


@pytest.mark.state_modules()
@pytest.mark.xfail(strict=True, reason="R62a-1: process_state._c_state reads the torch function "
                   "mode stack by each mode's class only; a TorchFunctionMode entered at import "
                   "(no global holds it) keeps a step counter nothing reads (changes [])")
def test_r62a_1_mode_counter_is_a_change():
    assert _probe(True)["changes"], _probe(True)


@pytest.mark.state_modules()
def test_r62a_1b_dispatch_flag_tells_step_2_from_step_1():
    assert (_dispatch(True)["flag1"], _dispatch(True)["flag2"]) == (False, True)
    assert (_dispatch(False)["flag1"], _dispatch(False)["flag2"]) == (False, False)


@pytest.mark.state_modules()
@pytest.mark.xfail(strict=True, reason="R62a-1 (dispatch form): the torch dispatch mode stack is "
                   "read by each mode's class only; a TorchDispatchMode entered at import keeps a "
                   "step counter nothing reads (changes [])")
def test_r62a_1b_dispatch_mode_counter_is_a_change():
    assert _dispatch(True)["changes"], _dispatch(True)


@pytest.mark.state_modules()
def test_r62a_2_flag_tells_step_2_from_step_1():
    assert (_hooks(True)["flag1"], _hooks(True)["flag2"]) == (False, True)
    assert (_hooks(False)["flag1"], _hooks(False)["flag2"]) == (False, False)


@pytest.mark.state_modules()
@pytest.mark.xfail(strict=True, reason="R62a-2: process_state._c_state reads torch's saved-tensor "
                   "default hooks by identity and bytecode only (value_text._function_text); "
                   "hooks pushed at import keep a step counter in the pack hook's __dict__ "
                   "nothing reads (changes [])")
def test_r62a_2_hook_counter_is_a_change():
    assert _hooks(True)["changes"], _hooks(True)


# -- proves (slow; numbers in ATTEMPTS.md, from ``/tmp/r62a/prove.sh``, 2 shared cores) --------

def _prove(path: Path) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R62a-1: EQUIVALENT rc 0, 24.5 s at 1257386e; truth step "
                   "2 w0 0.005758 w1 0.002748 w2 0.004218")
def test_r62a_1_function_mode_counter_plan_not_equivalent():
    assert _prove(ROUND / MODE) != 0


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R62a-1 (dispatch form): EQUIVALENT rc 0, 23.1 s at "
                   "1257386e; truth step 2 w0 0.005758 w1 0.002748 w2 0.004218")
def test_r62a_1b_dispatch_mode_counter_plan_not_equivalent():
    assert _prove(ROUND / DISPATCH) != 0


@pytest.mark.slow
def test_r62a_main_thread_attr_plan_not_equivalent():
    # control (passes): a counter on threading.main_thread() (threading's _main_thread global,
    # read by its own attributes: R56a-3) is UNKNOWN rc 2, 24.0 s
    assert _prove(ROUND / "r62a_03_main_thread_attr_wrong.py") != 0


@pytest.mark.slow
def test_r62a_thread_at_import_plan_not_equivalent():
    # control (passes): a thread started at import is refused (exit 3, 5.2 s: R34b-2)
    assert _prove(ROUND / "r62a_05_thread_object_counter_wrong.py") != 0


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R62a-2: EQUIVALENT rc 0, 25.1 s at 1257386e; truth step "
                   "2 w0 0.005758 w1 0.002748 w2 0.004218")
def test_r62a_2_saved_hooks_counter_plan_not_equivalent():
    assert _prove(ROUND / HOOKS) != 0


@pytest.mark.slow
@pytest.mark.parametrize("example", ["mlp_ddp.py", "gpt2_ddp.py"])
def test_r62a_right_example_stays_equivalent(example):
    assert _prove(TREE / "examples" / "torch" / example) == 0
