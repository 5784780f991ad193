"""Adversarial round 61c (``tests/adversarial/ATTEMPTS.md``, "Round 61c"): c818cc29 (rounds 61a
and 61b fixed) attacked. Plans in ``plans/round61c/`` (template r61b_* / r60c_03: the parallel
step doubles its gradients from step 2 on a flag); the truth is
``python tests/adversarial/torch4_truth.py FILE 2``.

The unit forms run each plan's code (from its ``H = {}`` line: the import-time patch and the
flag) in a child interpreter of its own between two ``_process_state`` fingerprints; the
controls (the same code, the patch not applied) likewise.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from tests.adversarial.child_probe import patch_flags, plan_flag_src

TREE = Path(__file__).resolve().parents[2]
ROUND = Path(__file__).resolve().parent / "plans" / "round61c"

PLANS = {
    "manager_dict_get": "r61c_01_manager_dict_subclass_get_wrong.py",
    "environ_dict_get": "r61c_02_environ_dict_subclass_get_wrong.py",
}

# the entry that must see the step's counter (the controls: it does)
_SEEN = {
    "manager_dict_get": "logging's registry and disable level",
    "environ_dict_get": "the environment (os.environ)",
}

_WHY = {
    "manager_dict_get": "R61c-1: logging's manager __dict__ set to a dict subclass; its get "
                        "answers _disable 0 to _c_state",
    "environ_dict_get": "R61c-2: os.environ.__dict__ set to a dict subclass; its get answers "
                        "a frozen _data to _read_process_state",
}

def _plan_src(name: str, patched: bool = True) -> str:
    return plan_flag_src(ROUND / PLANS[name], None if patched else 'PATCH()')


def _run(flags: dict) -> dict:
    return patch_flags("r61c", flags)


@functools.lru_cache(maxsize=None)
def _patched(name: str) -> dict:
    return _run({name: _plan_src(name)})[name]


@functools.lru_cache(maxsize=1)
def _controls() -> dict:
    # every control in one child (nothing patched: each flag's state is its own setting)
    return _run({n: _plan_src(n, patched=False) for n in sorted(PLANS)})


def _control(name: str) -> dict:
    return _controls()[name]


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", sorted(PLANS))
def test_r61c_flag_tells_step_2_from_step_1(name):
    assert (_control(name)["flag1"], _control(name)["flag2"]) == (False, True)
    assert (_patched(name)["flag1"], _patched(name)["flag2"]) == (False, True)


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", sorted(PLANS))
def test_r61c_control_step_1_state_is_a_change(name):
    assert _SEEN[name] in _control(name)["changes"]


def _xfail(names):
    return [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=_WHY[n]))
            if n in names else n for n in sorted(PLANS)]


# the unit forms that fail at c818cc29 (changes [] when patched); none since faecd14c (the
# namespaces read only as exact dicts, through dict.get)
_HIDDEN: frozenset[str] = frozenset()


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", _xfail(_HIDDEN))
def test_r61c_patched_step_1_state_is_a_change(name):
    # at c818cc29: changes [] (each patch hides its setting, strict xfails, _WHY)
    assert _SEEN[name] in _patched(name)["changes"], name


# -- proves (slow; numbers in ATTEMPTS.md, from ``/tmp/r61c/prove.sh``, 2 shared cores) --------

def _prove(name: str) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(ROUND / name), "--jobs", "1", "--no-check"])


# proved at c818cc29 (ATTEMPTS.md "Round 61c"); filled below from the measurements
# (truth, each: step 2 w0 0.005758 w1 0.002748 w2 0.004218)
_FALSE_ACCEPTS: dict[str, str] = {
    "manager_dict_get": "EQUIVALENT rc 0, 57.0 s",
    "environ_dict_get": "EQUIVALENT rc 0, 53.8 s",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PLANS))
def test_r61c_wrong_plan_not_equivalent(name):
    # (strict xfails at c818cc29, EQUIVALENT: _WHY, _FALSE_ACCEPTS; fixed at faecd14c)
    assert _prove(PLANS[name]) != 0


@pytest.mark.slow
def test_r61c_named_modules_plan_not_equivalent():
    # r61c_03 (nn.Module.named_modules answering all but w0 to step_state): UNKNOWN rc 2 at
    # c818cc29 (replicate's forward-hook state reaches w0, whose counter is then read); no
    # unit form (the lever is step_state's, not _process_state's)
    assert _prove("r61c_03_module_named_modules_wrong.py") != 0


@pytest.mark.slow
@pytest.mark.parametrize("example", ["mlp_ddp.py", "gpt2_ddp.py"])
def test_r61c_right_example_stays_equivalent(example):
    from proofs.cli import prove_main

    path = TREE / "examples" / "torch" / example
    assert prove_main(["--torch", str(path), "--jobs", "1", "--no-check"]) == 0
