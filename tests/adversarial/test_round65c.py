"""Adversarial round 65c (``tests/adversarial/ATTEMPTS.md``, "Round 65c"): 2855c306 / 9b42fb13
(a function's globals read in full by the step-state ``_Encoder`` when they are no module's,
``op_namespaces``, ``user_ids``, ``_PRESENT`` with its recorded ``__module__``) attacked. Plans
in ``plans/round65c/`` (template r62d_01: the parallel step doubles its gradients from step 2
on a flag); the truth is ``python tests/adversarial/torch4_truth.py FILE 2``.

R65c-1 (false accept): R64d-3's fix reads private globals only for a function the ``_Encoder``
meets (the train file's state). The same function kept as an attribute of another module
(``json.r65c_flag``, ``fnmatch.r65c_f``) is read by ``process_state``'s ``_global_text`` ->
``object_text``: a function by the identities of its parts, never its ``__globals__``. A
counter in them is unseen: an ``exec``-made function with a globals dict of its own (r65c_01)
and a function of a second copy of ``fnmatch.py`` (r65c_02), both EQUIVALENT.
R65c-2 (false refusal, new with 2855c306): a right plan keeping the second copy's
``fnmatchcase`` as a train-file global and only calling it: its globals are now read in full,
their ``_compile_pattern`` (an ``lru_cache``) fills on the first call with a compiled pattern's
bound ``match`` (a C method) and becomes unreadable: UNKNOWN (r65c_03).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.child_probe import run_child

TREE = Path(__file__).resolve().parents[2]
ROUND = Path(__file__).resolve().parent / "plans" / "round65c"

_REASONS = {
    "R65c-1": "R65c-1: a function whose globals are no module's, kept as another module's "
              "attribute (json.r65c_flag, fnmatch.r65c_f), is read by process_state's "
              "object_text by the identities of its parts, its __globals__ never: a counter "
              "there is unseen (r65c_01, r65c_02 EQUIVALENT)",
    "R65c-2": "R65c-2: a second copy's fnmatchcase as a train-file global, only called: its "
              "globals now read in full; its lru_cache fills with a C bound method on the "
              "first call and is unreadable: UNKNOWN (r65c_03)",
}

_UNIT = """
import json, sys
from spec_lang.torch_frontend.process_state import _process_state
from spec_lang.torch_frontend.step_state import state_changes
import fnmatch as HOST
g = {"n": 0}
exec("def flag():\\n    global n\\n    n += 1\\n    return n\\n", g)
HOST.r65c_flag = g["flag"]
del g
s0 = _process_state([])
HOST.r65c_flag()
s1 = _process_state([])
print(json.dumps(sorted(state_changes(s0, s1))))
"""

_UNIT_CONTROL = _UNIT.replace(
    'g = {"n": 0}',
    'import types; M = types.ModuleType("r65c_ctl"); sys.modules["r65c_ctl"] = M; g = vars(M); '
    'g["n"] = 0')

_UNIT_COPY = """
import json, sys, fnmatch, importlib.util, importlib._bootstrap
from spec_lang.torch_frontend import step_state as ss
spec = importlib.util.spec_from_file_location("r65c_cp", fnmatch.__file__)
m = importlib._bootstrap._load(spec)
sys.modules.pop("r65c_cp")
def text():
    enc = ss._Encoder({}, frozenset(), frozenset(), module_globals=ss.module_namespaces([]))
    return ss._text(enc, m.fnmatchcase)
before = text()
m.fnmatchcase("train.py", "*.py")
after = text()
print(json.dumps([t for t in (before, after) if "cannot read" in t]))
"""


@pytest.mark.state_modules()
def test_r65c_unit_control_globals_held_by_module_seen():
    # the same function with a loaded module's namespace as its globals: `n` read by value
    assert run_child(_UNIT_CONTROL) != []


@pytest.mark.state_modules()
def test_r65c_unit_exec_fn_in_other_module():
    assert run_child(_UNIT) != []


@pytest.mark.state_modules()
@pytest.mark.xfail(strict=True, reason=_REASONS["R65c-2"])
def test_r65c_unit_second_copy_fn_read_only_readable():
    assert run_child(_UNIT_COPY) == []


def _prove(path: Path) -> int:
    from proofs.cli import prove_main  # noqa: PLC0415
    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


_WRONG = {
    "r65c_01_exec_fn_in_stdlib_module_wrong.py": None,   # (R65c-1: fixed, stop 65,
    "r65c_02_second_copy_fn_in_library_module_wrong.py": None,   # process_state's reading)
}


@pytest.mark.slow
@pytest.mark.parametrize("plan", sorted(_WRONG))
def test_r65c_wrong_plan_not_equivalent(plan, request):
    if _WRONG[plan]:
        request.applymarker(pytest.mark.xfail(strict=True, reason=_REASONS[_WRONG[plan]]))
    assert _prove(ROUND / plan) != 0


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=_REASONS["R65c-2"])
def test_r65c_second_copy_read_only_right():
    assert _prove(ROUND / "r65c_03_namedtuple_dataclass_lru_exec_copy_right.py") == 0


@pytest.mark.slow
@pytest.mark.parametrize("path", [
    TREE / "examples" / "torch" / "mlp_ddp.py",
    TREE / "examples" / "torch" / "gpt2_ddp.py",
])
def test_r65c_examples_equivalent(path):
    assert _prove(path) == 0
