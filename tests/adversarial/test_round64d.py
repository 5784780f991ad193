"""Adversarial round 64d (``tests/adversarial/ATTEMPTS.md``, "Round 64d"): 057969f9 (an exit
callback is read by identity when registered before the train file ran or by the import of a
library's own file, ``library_files.library_code``: the module-level code that registered it
equals ``compile()`` of a ``.py`` under sysconfig's library directories, unchanged since
``take_library_dirs``; ctypes' audit events no longer recorded) attacked. Plans in
``plans/round64d/`` (template r64b_04 / r62d_01: the parallel step doubles its gradients from
step 2 on a flag); the truth is ``python tests/adversarial/torch4_truth.py FILE 2``.

R64d-1 (false accept, new with 057969f9): ``library_code`` checks the *code* a module ran,
not *which module* ran it: a second instance of a real library file, with globals of its own,
passes. The train file loads the stdlib's ``multiprocessing/util.py`` again under a new name
(``importlib.util.spec_from_file_location`` + importlib's own ``_load``, r64d_01; or the
ordinary import statement of a package of its own whose ``util.py`` / ``process.py`` are
symlinks to the stdlib files, ``realpath`` resolving them, r64d_02) and drops it from
``sys.modules``. Its module-level code registers this instance's ``_exit_function``, read by
identity (``_global_text``); its globals, in no ``sys.modules`` entry, are read nowhere. The
step reaches the function through ``atexit.unregister(x)`` with ``x.__eq__`` and counts in its
``__globals__``.
R64d-2 (false refusal, older: not from 057969f9): a library module first imported in the step
whose import registers an exit callback that is not a plain Python function is a change:
``c_registries._callback_text`` gives the callback its module (what ``imported_in_step``
exempts) only for a ``FunctionType`` with no arguments, while docs/torch.md says any exit
callback such an import registers is no change. ``import PIL.Image`` inside ``train_step``
(``PIL._imaging.clear_cache``, a builtin) is UNKNOWN, "the steps leave different state ...
exit callbacks (atexit)" (r64d_04); ``import filelock`` there (a plain function) is the control
(r64d_05).
R64d-3 (false accept, older: R64d-1's second instance without the exit callbacks): a train-file
global ``F`` holding a function of a second instance of a library file (``multiprocessing/util.py``'s
``_exit_function``, r64d_06; ``fnmatch.py``'s ``fnmatch``, whose import registers nothing,
r64d_07) is read as a library function, by identity; its ``__globals__``, a module dict in no
``sys.modules`` entry, are read nowhere, and the step counts in them. No unit form (the probe
does not read a snippet's globals).

The unit forms run a snippet in a child of its own between two ``_process_state`` fingerprints
(``child_probe.patch_flags``, which calls ``watch_atexit`` and so ``take_library_dirs``).
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import pytest

from tests.adversarial.child_probe import patch_flags

TREE = Path(__file__).resolve().parents[2]
ROUND = Path(__file__).resolve().parent / "plans" / "round64d"

_REASONS = {
    "R64d-3": "R64d-3: a train-file global holding a function of a second instance of a library "
              "file (importlib's _load under a new name, dropped from sys.modules) is read by "
              "identity as a library function; its globals, in no sys.modules entry, are read "
              "nowhere: the step counts in F.__globals__ (older: no exit callback needed)",
    "R64d-2": "R64d-2: a library module first imported in the step whose import registers an "
              "exit callback that is not a plain Python function (PIL._imaging.clear_cache, a "
              "builtin; matplotlib's Gcf.destroy_all, a bound method) is a change: "
              "imported_in_step exempts FunctionType callbacks only, docs/torch.md says any "
              "such callback is no change (a right plan importing PIL lazily in train_step "
              "UNKNOWN; older, not from 057969f9)",
    "R64d-1": "R64d-1: library_code compares the code a module ran with a library file's, "
              "not which module ran it: a second instance of multiprocessing/util.py (loaded "
              "under a new name, or through symlinks in a package of the train file's own) "
              "registers its _exit_function, read by identity; its globals are read nowhere "
              "and the step counts in them through atexit.unregister's ==",
}

_GRAB = '''
class _Grab:
    def __init__(self):
        self.seen = []
    def __eq__(self, other):
        g = getattr(other, "__globals__", None)
        if type(g) is dict and g.get("__name__") == NAME:
            g["_r64d_n"] = g.get("_r64d_n", 0) + 1
            self.seen.append(g["_r64d_n"])
        return False
    __hash__ = object.__hash__
def _flag():
    g = _Grab()
    atexit.unregister(g)
    return bool(g.seen) and g.seen[-1] >= 2
'''

_UNIT = {
    "second_instance_by_load": '''
import atexit, importlib.util, importlib._bootstrap, multiprocessing.util
NAME = "multiprocessing.r64d_util_unit"
def _second_instance():
    spec = importlib.util.spec_from_file_location(NAME, multiprocessing.util.__file__)
    try:
        importlib._bootstrap._load(spec)
    finally:
        sys.modules.pop(NAME, None)
_second_instance()
''' + _GRAB,
    "second_instance_by_symlinks": '''
import atexit, importlib, tempfile, multiprocessing.util, multiprocessing.process
NAME = "r64d_unit_pkg.util"
def _second_instance():
    d = tempfile.mkdtemp()
    os.mkdir(f"{d}/r64d_unit_pkg")
    open(f"{d}/r64d_unit_pkg/__init__.py", "w").close()
    os.symlink(multiprocessing.util.__file__, f"{d}/r64d_unit_pkg/util.py")
    os.symlink(multiprocessing.process.__file__, f"{d}/r64d_unit_pkg/process.py")
    sys.path.insert(0, d)
    try:
        importlib.import_module(NAME)
    finally:
        sys.path.remove(d)
        for n in ("r64d_unit_pkg.util", "r64d_unit_pkg.process", "r64d_unit_pkg"):
            sys.modules.pop(n, None)
_second_instance()
''' + _GRAB,
}
_FINDING: dict[str, str] = {}     # (R64d-1: fixed in stop 64, c_registries.library_callbacks)

# control (seen, held since stop 64): the same module-level code in a file the train file
# writes (a copy, not a symlink): not a library file, its callback read in full
_CONTROLS = {
    "copied_library_file": '''
import atexit, importlib, shutil, tempfile, multiprocessing.util, multiprocessing.process
NAME = "r64d_unit_copy.util"
def _second_instance():
    d = tempfile.mkdtemp()
    os.mkdir(f"{d}/r64d_unit_copy")
    open(f"{d}/r64d_unit_copy/__init__.py", "w").close()
    shutil.copy(multiprocessing.util.__file__, f"{d}/r64d_unit_copy/util.py")
    shutil.copy(multiprocessing.process.__file__, f"{d}/r64d_unit_copy/process.py")
    sys.path.insert(0, d)
    try:
        importlib.import_module(NAME)
    finally:
        sys.path.remove(d)
        for n in ("r64d_unit_copy.util", "r64d_unit_copy.process", "r64d_unit_copy"):
            sys.modules.pop(n, None)
_second_instance()
''' + _GRAB,
}


@functools.lru_cache(maxsize=None)
def _unit(name: str) -> dict:
    return patch_flags("r64d", {name: {**_UNIT, **_CONTROLS}[name]})[name]


def _maybe_xfail(finding: str | None) -> list:
    return [] if finding is None else [pytest.mark.xfail(strict=True, reason=_REASONS[finding])]


@pytest.mark.slow   # (the flag's lever; its change is checked by the fast test)
@pytest.mark.state_modules()
@pytest.mark.parametrize("name", sorted(_UNIT) + sorted(_CONTROLS))
def test_r64d_unit_flag_tells_step_2_from_step_1(name):
    got = _unit(name)
    assert (got["flag1"], got["flag2"]) == (False, True), got


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", [pytest.param(n, marks=_maybe_xfail(_FINDING.get(n)))
                                  for n in sorted(_UNIT) + sorted(_CONTROLS)])
def test_r64d_unit_counter_is_a_change(name):
    try:
        got = _unit(name)
    except subprocess.CalledProcessError as e:
        pytest.fail(f"the fingerprint raised: {e.stderr[-400:]}")
    assert got["changes"], (_REASONS.get(_FINDING.get(name)), got)


def _second_copy(library_file: str, name: str):
    """A second instance of a library's file, in no ``sys.modules`` entry (as r64d_06/07)."""
    import importlib.util  # noqa: PLC0415
    spec = importlib.util.spec_from_file_location(name, library_file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _read(v, user=()):
    from spec_lang.torch_frontend.step_state import _Encoder, _text, module_namespaces
    names = frozenset(m.__name__ for m in user)
    return _text(_Encoder({}, frozenset(), names, module_globals=module_namespaces(user)), v)


def test_r64d_3_unit_second_copy_function_globals_are_read():
    """R64d-3 (fixed): a train-file global holding a function of a second copy of a library
    file (colorsys.py: floats and functions only) reads that copy's globals; a counter the step
    keeps there is a change. The library's own function (its module in ``sys.modules``) is read
    without its globals, which ``_process_state`` reads."""
    import colorsys  # noqa: PLC0415
    copy = _second_copy(colorsys.__file__, "r64d_unit_colorsys")
    f = copy.rgb_to_hsv
    before = _read(f)
    assert not before.startswith("!"), before
    vars(copy)["_r64d_n"] = 1
    after = _read(f)
    assert after != before and not after.startswith("!")
    vars(copy)["ONE_THIRD"] = 0.5          # a library constant changed in the copy
    assert _read(f) not in (before, after)
    assert _read(colorsys.rgb_to_hsv) == _read(colorsys.rgb_to_hsv)
    own = _read(colorsys.rgb_to_hsv)
    vars(copy)["_r64d_n"] = 2              # (the real module's function does not see the copy)
    assert _read(colorsys.rgb_to_hsv) == own


def test_r64d_3_unit_exec_made_function_globals_are_read():
    """A function made by ``eval`` with globals of its own (``{}``: the interpreter puts
    builtins' namespace under ``__builtins__``, read as the "builtins" entry): readable and the
    same when nothing changed; a counter kept in them is a change."""
    g: dict = {"k": 1}
    f = eval("lambda x: x * k", g)  # noqa: S307 -- a fixed test expression
    first = _read(f)
    assert first == _read(f) and not first.startswith("!"), first
    g["k"] = 2
    assert _read(f) != first


def test_r64d_3_unit_train_file_namespace_not_read_twice():
    """The train file's functions' globals are its module's namespace, read as its own
    entries: not again inside each function (the user module is in ``module_namespaces``)."""
    import types  # noqa: PLC0415
    mod = types.ModuleType("r64d_unit_train")
    exec("def step(x):\n    return x * SCALE\nSCALE = 2\n", vars(mod))  # noqa: S102
    first = _read(mod.step, [mod])
    vars(mod)["SCALE"] = 3
    assert _read(mod.step, [mod]) == first
    assert _read(mod.step) != first        # not a user module: its globals read with it


def _prove(path: Path) -> int:
    from proofs.cli import prove_main  # noqa: PLC0415
    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


_WRONG = {
    "r64d_01_second_instance_library_file_exit_callback_wrong.py": None,   # (R64d-1: fixed,
    "r64d_02_symlinked_library_file_exit_callback_wrong.py": None,         # stop 64)
    "r64d_06_second_instance_function_as_global_wrong.py": None,   # (R64d-3: fixed, stop 65,
    "r64d_07_second_instance_function_as_global_no_atexit_wrong.py": None,  # step_state._globals)
}


@pytest.mark.slow
@pytest.mark.parametrize("plan", sorted(_WRONG))
def test_r64d_wrong_plan_not_equivalent(plan, request):
    if _WRONG[plan]:
        request.applymarker(pytest.mark.xfail(strict=True, reason=_REASONS[_WRONG[plan]]))
    assert _prove(ROUND / plan) != 0


@pytest.mark.slow
@pytest.mark.parametrize("path", [
    ROUND / "r64d_03_libraries_registering_exit_callbacks_at_import_right.py",
    TREE / "examples" / "torch" / "mlp_ddp.py",
    TREE / "examples" / "torch" / "gpt2_ddp.py",
])
def test_r64d_right_plans_and_examples_equivalent(path):
    assert _prove(path) == 0


# library_code directly: which exit callbacks registered after watch_atexit count as a library
# file's (read by identity). Common libraries' own imports must (control: no false refusal of
# a right plan importing them); a second instance of a library file must not (R64d-1)
_LIB_PROBE = '''
import atexit, importlib, json, os, sys, tempfile
import torch, numpy
from spec_lang.torch_frontend.op_guard import take_baseline
take_baseline()
from spec_lang.torch_frontend import c_registries as C
C.watch_atexit()
seen = []
_reg = C._REGISTER
def spy(f, *a, **k):
    seen.append(f)
    return _reg(f, *a, **k)
C._REGISTER = spy
import matplotlib
matplotlib.use("Agg")
for m in ("PIL.Image", "matplotlib.pyplot", "filelock", "torch._inductor.async_compile",
          "rlcompleter"):
    importlib.import_module(m)
libs = [getattr(f, "__qualname__", "?") for f in seen]
n_libs = len(seen)
import importlib.util, importlib._bootstrap, multiprocessing.util
spec = importlib.util.spec_from_file_location("multiprocessing.r64d_lib", multiprocessing.util.__file__)
importlib._bootstrap._load(spec)
sys.modules.pop("multiprocessing.r64d_lib")
lib = C.library_callbacks()
print(json.dumps({"libraries": libs,
                  "libraries_passed": [id(f) in lib for f in seen[:n_libs]],
                  "second_instance_passed": [id(f) in lib for f in seen[n_libs:]]}))
'''


@functools.lru_cache(maxsize=None)
def _lib_probe() -> dict:
    from tests.adversarial.child_probe import run_child  # noqa: PLC0415
    return run_child(_LIB_PROBE)


@pytest.mark.state_modules()
def test_r64d_common_libraries_exit_callbacks_are_library_code():
    got = _lib_probe()
    assert len(got["libraries"]) >= 5 and all(got["libraries_passed"]), got


@pytest.mark.state_modules()       # (R64d-1: fixed in stop 64)
def test_r64d_second_instance_exit_callback_is_not_library_code():
    got = _lib_probe()
    assert got["second_instance_passed"] and not any(got["second_instance_passed"]), got


# R64d-2 has no unit form: `patch_flags`' `state_changes` does not apply `imported_in_step`
# (filelock's import in the flag is a change there too); only the plans show it
@pytest.mark.slow                  # (R64d-2: fixed, stop 65, c_registries._callback_text)
def test_r64d_lazy_library_import_in_step_equivalent():
    assert _prove(ROUND / "r64d_04_lazy_library_import_in_step_right.py") == 0


@pytest.mark.slow
def test_r64d_lazy_filelock_import_in_step_equivalent():    # (control for R64d-2)
    assert _prove(ROUND / "r64d_05_lazy_filelock_import_in_step_right.py") == 0
