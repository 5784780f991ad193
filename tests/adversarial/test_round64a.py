"""Adversarial round 64a (``tests/adversarial/ATTEMPTS.md``, "Round 64a"): 2576eaa3's, a5fdaf25's
and d8e12ea6's step-state fingerprint changes (R63e-1's fix: ``c_registries.watch_atexit`` wraps
``atexit.unregister`` and ``atexit._run_exitfuncs``) attacked. Plans in ``plans/round64a/``
(template r63e_01 / r62d_01: the parallel step doubles its gradients from step 2 on a flag); the
truth is ``python tests/adversarial/torch4_truth.py FILE 2``.

R64a-1 (false accept, R63e-1 again: 2576eaa3's wrapper is a Python attribute of the ``atexit``
module object, the C function stays reachable): a second ``atexit`` module object made by
``_imp.create_builtin(atexit.__spec__)``, or imported with ``sys.modules["atexit"]`` popped
and put back, has the original C ``unregister`` (the callbacks live in the interpreter, shared
by every module object); R63e-1's probe handed to it reaches the exit callback
``argparse.Namespace(box=[0]).__repr__`` and counts in ``box[0]``; nothing is recorded. (Also:
``atexit.unregister.__globals__["_UNREGISTER"]``, the front end's own saved original.)
``importlib.reload(atexit)`` is seen (a control).
R64a-2 (false accept, c2d33d8e's reading kept by 2576eaa3): the exit callback's library object
(read by ``object_text``: identity, own attributes' types) reached by address: its ``id()``
kept as an int global, ``ctypes.cast(ID, ctypes.py_object).value`` in the step (r64a_03).
R64a-3 (false accept, older: not from the commits under review): a library object's bound
method kept in a library module's global (``copyreg.dispatch_table`` by ``copyreg.pickle``) is
read by what it names (identity); the step reaches the object through that global and counts
in an attribute's list (r64a_07).
R64a-4 (refusal of a right plan, older): a signal handler whose class has no ``__module__``
(``type()`` called under ``eval`` with globals of their own, no ``__name__``) makes
``value_text._ident_text`` raise ``AttributeError``: "capturing the training step failed",
exit 3 (r64a_08).
R64a-5 (false refusal, new with 2576eaa3): ``atexit.unregister`` handed a
``functools.partial`` (or a callable object of the user's class with no ``__eq__``: ``==`` is
identity, no code runs) at import makes the exit callbacks unreadable for the whole process:
a right plan that registers and unregisters a partial exit callback at import is UNKNOWN
(r64a_09; EQUIVALENT at e495884b).

The unit forms run a snippet in a child of its own between two ``_process_state`` fingerprints
(``child_probe.patch_flags``; R64a-3's read the globals of ``sys`` and ``copyreg``).
"""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path

import pytest

from tests.adversarial import child_probe
from tests.adversarial.child_probe import patch_flags

TREE = Path(__file__).resolve().parents[2]
ROUND = Path(__file__).resolve().parent / "plans" / "round64a"

_REASONS = {
    "R64a-1": "R64a-1: atexit's original unregister is reached through a second atexit module "
              "object (_imp.create_builtin, sys.modules popped) or the wrapper's globals: "
              "R63e-1's probe counts in an exit callback's library object, nothing recorded",
    "R64a-2": "R64a-2: an exit callback's library object is read by identity and own "
              "attributes' types; the step reaches it by ctypes.cast(id, py_object)",
    "R64a-3": "R64a-3: a library object's bound method held in a library module's global "
              "(copyreg.dispatch_table) is read by identity; the step counts in its object "
              "(older)",
    "R64a-4": "R64a-4: a signal handler whose class has no __module__ crashes _ident_text "
              "(AttributeError) while the signal handlers are read: exit 3 (older)",
    "R64a-5": "R64a-5: atexit.unregister handed a functools.partial or a callable object "
              "whose == is identity makes the exit callbacks unreadable (2576eaa3): a right "
              "plan UNKNOWN",
}

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
def _counted(g):
    return bool(g.seen) and g.seen[-1] >= 2
'''

_MK = '''
import atexit, argparse
def _mk():
    ns = argparse.Namespace(box=[0])
    atexit.register(ns.__repr__)
    return ns
_mk()
'''

_UNIT = {
    "atexit_unregister_imp_create_builtin": _MK + _GRAB + '''
def _flag():
    import _imp
    g = _Grab()
    _imp.create_builtin(atexit.__spec__).unregister(g)
    return _counted(g)
''',
    "atexit_unregister_sys_modules_reimport": _MK + _GRAB + '''
def _flag():
    import importlib
    old = sys.modules.pop("atexit")
    try:
        a = importlib.import_module("atexit")
    finally:
        sys.modules["atexit"] = old
    g = _Grab()
    a.unregister(g)
    return _counted(g)
''',
    # R64a-2's unit form: the callback's object by its address (read in full now, and the
    # ctypes call recorded)
    "atexit_object_by_ctypes_id": """
import atexit, argparse, ctypes
_NS = argparse.Namespace(box=[0])
atexit.register(_NS.__repr__)
ID = id(_NS)
del _NS
def _flag():
    s = ctypes.cast(ID, ctypes.py_object).value
    s.box[0] += 1
    return s.box[0] >= 2
""",
}
# (fixed in stop 64: an exit callback the train file registers is read in full, whatever its
# object's class; ctypes' address-to-object calls are recorded as the collector's are)
_FINDING: dict[str, str] = {}

# control (seen): importlib.reload(atexit)
_CONTROLS = {
    "atexit_unregister_after_reload": _MK + _GRAB + '''
def _flag():
    import importlib
    g = _Grab()
    importlib.reload(atexit).unregister(g)
    return _counted(g)
''',
}


@functools.lru_cache(maxsize=None)
def _unit(name: str) -> dict:
    return patch_flags("r64a", {name: {**_UNIT, **_CONTROLS}[name]})[name]


def _maybe_xfail(finding: str | None) -> list:
    return [] if finding is None else [pytest.mark.xfail(strict=True, reason=_REASONS[finding])]


@pytest.mark.slow   # (the flag's lever; its change is checked by the fast test)
@pytest.mark.state_modules()
@pytest.mark.parametrize("name", sorted(_UNIT) + sorted(_CONTROLS))
def test_r64a_unit_flag_tells_step_2_from_step_1(name):
    assert (_unit(name)["flag1"], _unit(name)["flag2"]) == (False, True), _unit(name)


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", [pytest.param(n, marks=_maybe_xfail(_FINDING.get(n)))
                                  for n in sorted(_UNIT) + sorted(_CONTROLS)])
def test_r64a_unit_counter_is_a_change(name):
    assert _unit(name)["changes"], (_REASONS.get(_FINDING.get(name)), _unit(name))


# R64a-3's unit form: the fingerprints read the globals of sys and copyreg
_GLOBALS_PROBE = child_probe.PATCH_PROBE.replace(
    "_process_state(modules=[])", "_process_state(modules=['sys', 'copyreg'])")
_HOLDERS = {
    "sys_excepthook_library_object": '''
import argparse
_OLD = sys.excepthook
sys.excepthook = argparse.Namespace(box=[0]).__repr__
def _flag():
    s = sys.excepthook.__self__
    s.box[0] += 1
    return s.box[0] >= 2
''',
    "copyreg_library_object": '''
import argparse, copyreg
class _T:
    pass
copyreg.pickle(_T, argparse.Namespace(box=[0]).__repr__)
def _flag():
    s = copyreg.dispatch_table[_T].__self__
    s.box[0] += 1
    return s.box[0] >= 2
''',
}


@functools.lru_cache(maxsize=None)
def _holder(name: str) -> dict:
    return child_probe.run_child(_GLOBALS_PROBE.replace("ROUND", "r64a"),
                                 json.dumps({name: _HOLDERS[name]}))[name]


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", sorted(_HOLDERS))
@pytest.mark.xfail(strict=True, reason=_REASONS["R64a-3"])
def test_r64a_unit_library_global_holder_is_a_change(name):
    got = _holder(name)
    assert (got["flag1"], got["flag2"]) == (False, True), got
    assert got["changes"], (_REASONS["R64a-3"], got)


_NO_MODULE = '''
def _handler():
    K = eval("type('K', (), {'__call__': lambda self, *a: None})", {})
    return K()
signal.signal(signal.SIGUSR2, _handler())
def _flag():
    return False
'''


@pytest.mark.state_modules()
def test_r64a_unit_handler_class_without_module_no_crash():
    try:
        got = patch_flags("r64a", {"no_module": _NO_MODULE})["no_module"]
    except subprocess.CalledProcessError as e:
        pytest.fail(f"the fingerprint raised: {e.stderr[-400:]}")
    assert got["changes"] == [], got


# R64a-5's unit form: right, at import (before the first fingerprint); no change expected
_UNREGISTER_RIGHT = {
    "import_unregister_partial": '''
import atexit, functools
def _save(path):
    pass
_P = functools.partial(_save, "/tmp/x")
atexit.register(_P)
atexit.unregister(_P)
def _flag():
    return False
''',
    "import_unregister_callable_object": '''
import atexit
class _Saver:
    def __call__(self):
        pass
_S = _Saver()
atexit.register(_S)
atexit.unregister(_S)
def _flag():
    return False
''',
}


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", sorted(_UNREGISTER_RIGHT))
def test_r64a_unit_unregister_at_import_no_change(name):
    got = patch_flags("r64a", {name: _UNREGISTER_RIGHT[name]})[name]
    assert got["changes"] == [], got


def _prove(path: Path) -> int:
    from proofs.cli import prove_main  # noqa: PLC0415
    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


_WRONG = {
    "r64a_01_atexit_unregister_imp_create_builtin_wrong.py": None,    # (fixed, stop 64)
    "r64a_02_atexit_unregister_sys_modules_reimport_wrong.py": None,
    "r64a_03_atexit_object_by_ctypes_id_wrong.py": None,
    "r64a_04_atexit_object_by_weakref_global_wrong.py": None,     # (UNKNOWN: held)
    "r64a_05_atexit_object_by_contextvar_default_wrong.py": None,  # (UNKNOWN: held)
    "r64a_07_copyreg_library_object_wrong.py": "R64a-3",
}


@pytest.mark.slow
@pytest.mark.parametrize("plan", sorted(_WRONG))
def test_r64a_wrong_plan_not_equivalent(plan, request):
    if _WRONG[plan]:
        request.applymarker(pytest.mark.xfail(strict=True, reason=_REASONS[_WRONG[plan]]))
    assert _prove(ROUND / plan) != 0


@pytest.mark.slow
@pytest.mark.parametrize("plan", [     # (R64a-4, R64a-5: fixed in stop 64)
    "r64a_08_signal_handler_class_without_module_right.py",
    "r64a_09_atexit_unregister_partial_at_import_right.py",
])
def test_r64a_right_plan_equivalent(plan):
    assert _prove(ROUND / plan) == 0


@pytest.mark.slow
@pytest.mark.parametrize("path", [
    TREE / "examples" / "torch" / "mlp_ddp.py",
    TREE / "examples" / "torch" / "gpt2_ddp.py",
])
def test_r64a_right_plans_equivalent(path):
    assert _prove(path) == 0
