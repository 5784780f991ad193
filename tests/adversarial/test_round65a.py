"""Adversarial round 65a (``tests/adversarial/ATTEMPTS.md``, "Round 65a"): 02a10fab
(``c_registries._module_holds``: an exit callback registered before the train file ran is read
as a library's, by identity, only while ``sys.modules`` holds under its function's
``__module__`` the module whose ``vars()`` are its ``__globals__``) attacked. Plans in
``plans/round65a/`` (template r64e_01 / r62d_01: the parallel step doubles its gradients from
step 2 on a flag); the truth is ``python tests/adversarial/torch4_truth.py FILE 2``.

R65a-1 (false accept, older than 02a10fab: ``process_state._LAZY_NAMESPACES``): a module the
train file puts into ``sys.modules`` under a ``torch.ops.`` (or ``torch.classes.``) name has its
globals read nowhere: the torch branch skips those names and the other-modules branch skips
every torch name; ``registry_state`` reads the hand-made entry by type and identity only. The
step counts in it through ``sys.modules`` (r65a_01 EQUIVALENT).
R65a-2 (false accept, with R65a-1): 02a10fab's ``_module_holds`` trusts the function's writable
``__module__``: r64e_01's displaced original ``multiprocessing.util`` kept under a name of the
train file's choosing, its ``_exit_function.__module__`` set to that name, passes the check;
under ``torch.ops.r65a_mp`` its globals are then read nowhere (r65a_02 EQUIVALENT), under a
plain name they are read as another module's and the counter is seen (r65a_03 UNKNOWN, the
control). No unit form (``patch_flags`` reads no module's globals).

The unit form runs a snippet in a child of its own between two ``_process_state`` fingerprints
(``child_probe.probe_flags``: the globals of the module named are selected for reading).
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import pytest

from tests.adversarial.child_probe import probe_flags

TREE = Path(__file__).resolve().parents[2]
ROUND = Path(__file__).resolve().parent / "plans" / "round65a"

_REASONS = {
    "R65a-1": "R65a-1: a module put into sys.modules by hand under a torch.ops. / "
              "torch.classes. name (process_state._LAZY_NAMESPACES) has its globals read "
              "nowhere (the torch branch skips the lazy namespaces, the other branch every "
              "torch name; registry_state reads the entry by type and identity): the step "
              "counts in it through sys.modules",
    "R65a-2": "R65a-2: c_registries._module_holds trusts the function's writable __module__: "
              "r64e_01's displaced original multiprocessing.util kept in sys.modules under "
              "torch.ops.r65a_mp and its _exit_function.__module__ set to it is read by "
              "identity again, its globals nowhere (with R65a-1; under a plain name, r65a_03, "
              "its globals are read and the counter seen)",
}


def _box(name: str) -> str:
    return f'''
import types
sys.modules["{name}"] = types.ModuleType("{name}")
def _flag():
    m = sys.modules["{name}"]
    m.n = getattr(m, "n", 0) + 1
    return m.n >= 2
'''


# name -> (snippet, the modules whose globals are read, finding or None: a control)
_UNIT = {
    "torch_ops_box": ("torch.ops.r65a_box", None),          # (R65a-1: fixed, stop 65,
    "torch_classes_box": ("torch.classes.r65a_box", None),  # op_namespaces.torch_namespace)
    "plain_box": ("r65a_box", None),          # control: read as another module, seen
}


@functools.lru_cache(maxsize=None)
def _units() -> dict:
    return probe_flags({k: (_box(n), [n]) for k, (n, _) in _UNIT.items()}, "import sys")


def _maybe_xfail(finding: str | None) -> list:
    return [] if finding is None else [pytest.mark.xfail(strict=True, reason=_REASONS[finding])]


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", sorted(_UNIT))
def test_r65a_unit_flag_tells_step_2_from_step_1(name):
    got = _units()[name]
    assert (got["flag1"], got["flag2"]) == (False, True), got


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", [pytest.param(n, marks=_maybe_xfail(f))
                                  for n, (_, f) in sorted(_UNIT.items())])
def test_r65a_unit_counter_is_a_change(name):
    try:
        got = _units()[name]
    except subprocess.CalledProcessError as e:
        pytest.fail(f"the fingerprint raised: {e.stderr[-400:]}")
    assert got["changes"], got


def _prove(path: Path) -> int:
    from proofs.cli import prove_main  # noqa: PLC0415
    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


_WRONG = {
    "r65a_01_hand_made_module_under_torch_ops_wrong.py": None,   # (R65a-1, R65a-2: fixed,
    "r65a_02_module_holds_trusts_writable_module_torch_ops_wrong.py": None,  # stop 65)
    "r65a_03_module_holds_plain_name_control_wrong.py": None,     # (control: UNKNOWN)
}


@pytest.mark.slow
@pytest.mark.parametrize("plan", sorted(_WRONG))
def test_r65a_wrong_plan_not_equivalent(plan, request):
    if _WRONG[plan]:
        request.applymarker(pytest.mark.xfail(strict=True, reason=_REASONS[_WRONG[plan]]))
    assert _prove(ROUND / plan) != 0


@pytest.mark.slow
@pytest.mark.parametrize("path", [
    TREE / "examples" / "torch" / "mlp_ddp.py",
    TREE / "examples" / "torch" / "gpt2_ddp.py",
])
def test_r65a_right_plans_and_examples_equivalent(path):
    assert _prove(path) == 0
