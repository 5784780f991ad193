"""Adversarial round 64e (``tests/adversarial/ATTEMPTS.md``, "Round 64e"): 0a698f6a
(``c_registries.library_callbacks``: an exit callback a library file's import registered counts
as a library's, read by identity, only while ``sys.modules`` holds under the registering
module's name the module whose globals the code ran with) attacked. Plans in
``plans/round64e/`` (template r64d_01 / r62d_01: the parallel step doubles its gradients from
step 2 on a flag); the truth is ``python tests/adversarial/torch4_truth.py FILE 2``.

R64e-1 (false accept, older than 0a698f6a: its check covers ``_LIBRARY_REGISTERED`` only; the
callbacks present before the train file ran, ``_PRESENT``, are read by identity whatever
``sys.modules`` holds): the train file pops the original ``multiprocessing.util`` (imported by
torch before the train file ran: its ``_exit_function`` is in ``_PRESENT``) from ``sys.modules``,
imports it again and rebinds every module global naming the original to the new module
(``multiprocessing.connection.util``: without that the connection module's entry shows the
counter, r64e_01's first version UNKNOWN). The original's globals are in no ``sys.modules``
entry and read nowhere; the step reaches its ``_exit_function`` through
``atexit.unregister(x)``'s ``x.__eq__`` and counts in its ``__globals__`` (r64e_01 EQUIVALENT).
R64e-2 (false accept, older and documented: the in-place family, R10-1 / R11-6, docs/torch.md
"Where the fingerprint stops"): a second copy of ``multiprocessing/util.py`` kept in
``sys.modules`` under its own new name is read as a library module, by what its globals name:
an ``itertools.count`` of it advanced in place is not seen (r64e_02 EQUIVALENT); the same with
an ``itertools.count`` the train file sets on the ORIGINAL module (r64e_03, the control: also
EQUIVALENT). So the copy kept in ``sys.modules`` opens nothing the original did not.

The unit form runs a snippet in a child of its own between two ``_process_state`` fingerprints
(``child_probe.patch_flags``: ``watch_atexit`` after torch's import, so
``multiprocessing.util._exit_function`` is in ``_PRESENT``; no module's globals read, so only
the exit callbacks' texts can show the counter).
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import pytest

from tests.adversarial.child_probe import patch_flags

TREE = Path(__file__).resolve().parents[2]
ROUND = Path(__file__).resolve().parent / "plans" / "round64e"

_REASONS = {
    "R64e-1": "R64e-1: an exit callback present before the train file ran (_PRESENT: "
              "multiprocessing.util._exit_function, imported by torch) is read by identity "
              "even when sys.modules no longer holds its module: the train file pops "
              "multiprocessing.util, imports it again and rebinds the globals naming the "
              "original; the original's globals are read nowhere and the step counts in them "
              "through atexit.unregister's == (0a698f6a's check covers _LIBRARY_REGISTERED only)",
    "R64e-2": "R64e-2 (older, documented in-place family R10-1 / R11-6): a library module's "
              "global object changed in place is not read: a second copy of "
              "multiprocessing/util.py kept in sys.modules under a new name (its "
              "_afterfork_counter advanced) and the original module with an itertools.count "
              "global set at import alike",
}

_GRAB = '''
class _Grab:
    def __init__(self):
        self.seen = []
    def __eq__(self, other):
        g = getattr(other, "__globals__", None)
        if type(g) is dict and g.get("__name__") == NAME \\
                and g is not vars(sys.modules[NAME]):
            g["_r64e_n"] = g.get("_r64e_n", 0) + 1
            self.seen.append(g["_r64e_n"])
        return False
    __hash__ = object.__hash__
def _flag():
    g = _Grab()
    atexit.unregister(g)
    return bool(g.seen) and g.seen[-1] >= 2
'''

_UNIT = {
    "displaced_present_module": '''
import atexit, importlib, multiprocessing.util
NAME = "multiprocessing.util"
def _displace():
    old = sys.modules.pop(NAME)
    new = importlib.import_module(NAME)
    for m in list(sys.modules.values()):
        d = getattr(m, "__dict__", None)
        if type(d) is dict:
            for k, v in list(d.items()):
                if v is old:
                    d[k] = new
_displace()
''' + _GRAB,
}
_FINDING: dict[str, str] = {}      # (R64e-1: fixed in stop 64, c_registries._module_holds)


@functools.lru_cache(maxsize=None)
def _unit(name: str) -> dict:
    return patch_flags("r64e", {name: _UNIT[name]})[name]


def _maybe_xfail(finding: str | None) -> list:
    return [] if finding is None else [pytest.mark.xfail(strict=True, reason=_REASONS[finding])]


@pytest.mark.slow   # (the flag's lever; its change is checked by the fast test)
@pytest.mark.state_modules()
@pytest.mark.parametrize("name", sorted(_UNIT))
def test_r64e_unit_flag_tells_step_2_from_step_1(name):
    got = _unit(name)
    assert (got["flag1"], got["flag2"]) == (False, True), got


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", [pytest.param(n, marks=_maybe_xfail(_FINDING.get(n)))
                                  for n in sorted(_UNIT)])
def test_r64e_unit_counter_is_a_change(name):
    try:
        got = _unit(name)
    except subprocess.CalledProcessError as e:
        pytest.fail(f"the fingerprint raised: {e.stderr[-400:]}")
    assert got["changes"], (_REASONS.get(_FINDING.get(name)), got)


def _prove(path: Path) -> int:
    from proofs.cli import prove_main  # noqa: PLC0415
    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


_WRONG = {
    "r64e_01_displaced_present_module_exit_callback_wrong.py": None,     # (R64e-1: fixed)
    "r64e_02_second_copy_kept_in_sys_modules_in_place_wrong.py": "R64e-2",
    "r64e_03_original_library_global_in_place_control_wrong.py": "R64e-2",
}


@pytest.mark.slow
@pytest.mark.parametrize("plan", sorted(_WRONG))
def test_r64e_wrong_plan_not_equivalent(plan, request):
    if _WRONG[plan]:
        request.applymarker(pytest.mark.xfail(strict=True, reason=_REASONS[_WRONG[plan]]))
    assert _prove(ROUND / plan) != 0


@pytest.mark.slow
@pytest.mark.parametrize("path", [
    ROUND / "r64e_04_ordinary_library_use_right.py",
    TREE / "examples" / "torch" / "mlp_ddp.py",
    TREE / "examples" / "torch" / "gpt2_ddp.py",
])
def test_r64e_right_plans_and_examples_equivalent(path):
    assert _prove(path) == 0
