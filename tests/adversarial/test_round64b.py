"""Adversarial round 64b (``tests/adversarial/ATTEMPTS.md``, "Round 64b"): 15ba917d's and
bcc4f1de's step-state fingerprint changes (round 64a's fixes: an exit callback the train file
registers read in full, a library's own by identity; ctypes' address-to-object events recorded
as the collector's; ``__module__`` through ``type``'s descriptor; deep reads: a loaded module by
name, a function's private globals once) attacked. Plans in ``plans/round64b/`` (template
r62d_01: the parallel step doubles its gradients from step 2 on a flag); the truth is
``python tests/adversarial/torch4_truth.py FILE 2``.

R64b-1 (false accept, 15ba917d's exemption): an exit callback registered "by a module's import"
(``_IMPORT_REGISTERED``) counts as a library's whatever module it is: the train file writes a
module of its own to a temporary directory and imports it; that module's top-level code
registers ``argparse.Namespace(box=[0]).__repr__`` (no global holds the object). Its text is
``object_text`` (identity, own attributes' types), and the step reaches the object through
``atexit.unregister(x)`` with ``x.__eq__`` (the wrapper is gone) or by ``ctypes.cast(ID,
py_object)`` (R64b-2) and counts in ``box[0]`` (r64b_04, r64b_05).
R64b-2 (the fix's claim does not hold on this Python, 3.11): ``ctypes.cast(id(x),
ctypes.py_object)`` raises no audit event at all (nor does a foreign function call: no
``ctypes.call_function`` outside ``_ctypes.call_function``); ``py_object.from_buffer_copy(
id(x).to_bytes(8, "little"))`` raises only ``ctypes.cdata/buffer``: neither is recorded, so an
object read by identity only stays reachable by its address (R64a-2's lever, unchanged).
``from_buffer`` of a ``c_ssize_t`` (it raises ``ctypes.cdata`` too) is recorded (control).
R64b-3 (crash; older, R62b-5 / R64a-4's family, left by 15ba917d): ``process_state._from_user``
tests ``_name(v.__module__) in who.modules or v.__module__ == "__main__"``: the second test
compares a function's ``__module__`` as it is, so an object there with an ``__eq__`` of its own
runs the train file's code inside the fingerprint (a function bound in a torch module's
globals); one that raises ends the capture, exit 3 (r64b_06).
R64b-4 (false refusal, new with 15ba917d): an exit callback the train file registers that is a
library object's bound method is read in full, what the object holds with it: a
``logging.StreamHandler(io.StringIO())``'s ``flush`` (a log kept in memory), the step logging
one line, changes the buffer and so the exit callbacks' entry: UNKNOWN (r64b_07; EQUIVALENT at
aead89d6, 15ba917d^). A ``FileHandler``'s ``close`` and a ``ThreadPoolExecutor``'s ``shutdown``
stay unchanged (controls).

The unit forms run a snippet in a child of its own between two ``_process_state`` fingerprints
(``child_probe.patch_flags``).
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import pytest

from tests.adversarial.child_probe import patch_flags

TREE = Path(__file__).resolve().parents[2]
ROUND = Path(__file__).resolve().parent / "plans" / "round64b"

_REASONS = {
    "R64b-1": "R64b-1: an exit callback a module's import registered is read by identity and "
              "own attributes' types, and any module counts: the train file imports a module "
              "of its own that registers argparse.Namespace(box=[0]).__repr__; the step "
              "counts in box[0] through atexit.unregister's == or ctypes.cast",
    "R64b-3": "R64b-3: _from_user compares a function's __module__ with '__main__' as it is: "
              "an object's __eq__ runs inside the fingerprint, one that raises ends the "
              "capture (exit 3; older)",
    "R64b-4": "R64b-4: a library object's bound method the train file registers as an exit "
              "callback is read in full: a StringIO log handler's flush, the step logging, is "
              "a change (a right plan UNKNOWN; EQUIVALENT before 15ba917d)",
    "R64b-2": "R64b-2: an address made an object through ctypes (cast, from_buffer, "
              "from_buffer_copy) is not recorded (cast raises no audit event on 3.11; the "
              "others at import refused right plans, R64c-1/-2): open, the R11-6 family",
}

_MK = '''
import atexit, argparse, importlib, tempfile
def _mk(name):
    d = tempfile.mkdtemp()
    with open(f"{d}/{name}.py", "w") as f:
        f.write("import atexit, argparse\\natexit.register(argparse.Namespace(box=[0]).__repr__)\\n")
    sys.path.insert(0, d)
    try:
        importlib.import_module(name)
    finally:
        sys.path.remove(d)
        del sys.modules[name]
'''

_GRAB = '''
class _Grab:
    def __init__(self):
        self.seen = []
    def __eq__(self, other):
        s = getattr(other, "__self__", None)
        box = getattr(s, "box", None)
        if type(box) is list:
            box[0] += 1
            self.seen.append(box[0])
        return False
    __hash__ = object.__hash__
'''

_UNIT = {
    "import_registered_unregister_grab": _MK + '_mk("r64b_unit_a")\n' + _GRAB + '''
def _flag():
    g = _Grab()
    atexit.unregister(g)
    return bool(g.seen) and g.seen[-1] >= 2
''',
    "import_registered_ctypes_cast": _MK + '_mk("r64b_unit_b")\n' + '''
import ctypes
class _G:
    def __eq__(self, other):
        global ID
        if type(getattr(getattr(other, "__self__", None), "box", None)) is list:
            ID = id(other.__self__)
        return False
    __hash__ = object.__hash__
ID = 0
atexit.unregister(_G())
def _flag():
    s = ctypes.cast(ID, ctypes.py_object).value
    s.box[0] += 1
    return s.box[0] >= 2
''',
    # R64b-2: the address-to-object ways themselves (a flag True both times: the audit entry
    # must turn unreadable once the step made an object of an address)
    "ctypes_cast_id": '''
X = [0]
def _flag():
    ctypes.cast(id(X), ctypes.py_object).value
    return True
''',
    "ctypes_from_buffer_copy_id": '''
X = [0]
def _flag():
    ctypes.py_object.from_buffer_copy(id(X).to_bytes(8, "little")).value
    return True
''',
}
# (fixed in stop 64: R64b-1, an exit callback registered after the train file started is read
# in full unless a library's own file registered it. Open, R64b-2: ctypes' address-to-object
# ways are not recorded at all since stop 64 (cast raises no audit event on 3.11; recording
# from_address / from_buffer refused right plans: R64c-1/-2); what the interpreter may call is
# read in full instead)
_FINDING = {
    "ctypes_cast_id": "R64b-2",
    "ctypes_from_buffer_copy_id": "R64b-2",
    "ctypes_from_buffer_id": "R64b-2",
}

# controls (seen): the same exit callback registered by the train file itself; from_buffer
_CONTROLS = {
    "train_registered_unregister_grab": '''
import atexit, argparse
def _mk():
    atexit.register(argparse.Namespace(box=[0]).__repr__)
_mk()
''' + _GRAB + '''
def _flag():
    g = _Grab()
    atexit.unregister(g)
    return bool(g.seen) and g.seen[-1] >= 2
''',
    "ctypes_from_buffer_id": '''
X = [0]
def _flag():
    ctypes.py_object.from_buffer(ctypes.c_ssize_t(id(X))).value
    return True
''',
}
_FLAGS = {"ctypes_cast_id": (True, True), "ctypes_from_buffer_copy_id": (True, True),
          "ctypes_from_buffer_id": (True, True)}


@functools.lru_cache(maxsize=None)
def _unit(name: str) -> dict:
    return patch_flags("r64b", {name: {**_UNIT, **_CONTROLS}[name]})[name]


def _maybe_xfail(finding: str | None) -> list:
    return [] if finding is None else [pytest.mark.xfail(strict=True, reason=_REASONS[finding])]


@pytest.mark.slow   # (the flag's lever; its change is checked by the fast test)
@pytest.mark.state_modules()
@pytest.mark.parametrize("name", sorted(_UNIT) + sorted(_CONTROLS))
def test_r64b_unit_flag_tells_step_2_from_step_1(name):
    got = _unit(name)
    assert (got["flag1"], got["flag2"]) == _FLAGS.get(name, (False, True)), got


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", [pytest.param(n, marks=_maybe_xfail(_FINDING.get(n)))
                                  for n in sorted(_UNIT) + sorted(_CONTROLS)])
def test_r64b_unit_counter_is_a_change(name):
    try:
        got = _unit(name)
    except subprocess.CalledProcessError as e:
        pytest.fail(f"the fingerprint raised: {e.stderr[-400:]}")
    assert got["changes"], (_REASONS.get(_FINDING.get(name)), got)


_EQ_PROBE = {
    "fn_module_eq_runs_code": '''
import torch.nn.functional as F
CALLS = [0]
class _M:
    def __eq__(self, other):
        CALLS[0] += 1
        return False
    __hash__ = object.__hash__
def _f():
    pass
_f.__module__ = _M()
F._r64b_f = _f
def _flag():
    return CALLS[0] > 0
''',
    "fn_module_eq_raises": '''
import torch.nn.functional as F
class _M:
    def __eq__(self, other):
        raise RuntimeError("r64b: my __eq__ ran inside the fingerprint")
    __hash__ = object.__hash__
def _f():
    pass
_f.__module__ = _M()
F._r64b_g = _f
def _flag():
    return False
''',
}


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", sorted(_EQ_PROBE))
def test_r64b_unit_function_module_eq_not_run_by_fingerprint(name):   # (fixed, stop 64)
    from tests.adversarial import child_probe  # noqa: PLC0415
    import json  # noqa: PLC0415
    src = child_probe.PATCH_PROBE.replace("ROUND", "r64b").replace(
        "_process_state(modules=[])", "_process_state(modules=['torch.nn.functional'])")
    try:
        got = child_probe.run_child(src, json.dumps({name: _EQ_PROBE[name]}))[name]
    except subprocess.CalledProcessError as e:
        pytest.fail(f"the fingerprint raised: {e.stderr[-400:]}")
    assert got["flag1"] is False, got        # (the fingerprint ran none of the file's code)


_RIGHT_UNITS = {
    "streamhandler_flush_logging_in_step": ('''
import atexit, logging, io
def _mk():
    h = logging.StreamHandler(io.StringIO())
    lg = logging.getLogger("r64b_sh")
    lg.setLevel(logging.INFO); lg.addHandler(h); lg.propagate = False
    atexit.register(h.flush)
_mk()
def _flag():
    logging.getLogger("r64b_sh").info("step done")
    return False
''', "R64b-4"),
    "filehandler_close_logging_in_step": ('''
import atexit, logging, tempfile
def _mk():
    h = logging.FileHandler(tempfile.mktemp(suffix=".log"))
    lg = logging.getLogger("r64b_fh")
    lg.setLevel(logging.INFO); lg.addHandler(h); lg.propagate = False
    atexit.register(h.close)
_mk()
def _flag():
    logging.getLogger("r64b_fh").info("step done")
    return False
''', None),
    "threadpool_shutdown": ('''
import atexit, concurrent.futures
def _mk():
    ex = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    atexit.register(ex.shutdown)
_mk()
def _flag():
    return False
''', None),
}


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", [pytest.param(n, marks=_maybe_xfail(_RIGHT_UNITS[n][1]))
                                  for n in sorted(_RIGHT_UNITS)])
def test_r64b_unit_right_exit_callback_no_change(name):
    got = patch_flags("r64b", {name: _RIGHT_UNITS[name][0]})[name]
    assert got["changes"] == [], got


def _prove(path: Path) -> int:
    from proofs.cli import prove_main  # noqa: PLC0415
    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


_WRONG = {
    "r64b_04_import_registered_exit_callback_unregister_wrong.py": None,   # (R64b-1: fixed,
    "r64b_05_import_registered_exit_callback_ctypes_cast_wrong.py": None,  # stop 64)
}


@pytest.mark.slow
@pytest.mark.parametrize("plan", sorted(_WRONG))
def test_r64b_wrong_plan_not_equivalent(plan, request):
    if _WRONG[plan]:
        request.applymarker(pytest.mark.xfail(strict=True, reason=_REASONS[_WRONG[plan]]))
    assert _prove(ROUND / plan) != 0


@pytest.mark.slow
@pytest.mark.parametrize("plan", [     # (ctypes used legitimately: held)
    "r64b_02_ctypes_mallopt_at_import_right.py",
    "r64b_03_ctypes_malloc_trim_local_right.py",
])
def test_r64b_right_plan_equivalent(plan):
    assert _prove(ROUND / plan) == 0


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=_REASONS["R64b-4"])
def test_r64b_stringio_log_handler_exit_callback_equivalent():
    assert _prove(ROUND / "r64b_07_stringio_log_handler_flush_exit_callback_right.py") == 0


@pytest.mark.slow
def test_r64b_function_module_eq_plan_no_crash():     # (R64b-3: fixed, stop 64)
    assert _prove(ROUND / "r64b_06_function_module_eq_in_fingerprint_right.py") in (0, 2)


@pytest.mark.slow
@pytest.mark.parametrize("path", [
    TREE / "examples" / "torch" / "mlp_ddp.py",
    TREE / "examples" / "torch" / "gpt2_ddp.py",
])
def test_r64b_right_plans_equivalent(path):
    assert _prove(path) == 0
