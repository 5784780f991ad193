"""Adversarial round 66c (``tests/adversarial/ATTEMPTS.md``, "Round 66c"): 0df09eeb (round
66b's fixes: ``op_namespaces.namespace_data`` (each cached overload of a genuine packet a fill
line of its own), ``registry_state.import_origin`` (a built-in / frozen origin needs
importlib's own importer and ``sys.modules[spec.name] is mod``), ``registry_state.file_copies``
/ ``_files`` (a module's files: spec origin, an exact file loader's ``path``, ``__file__``,
the ``co_filename`` of its first plain function)) attacked. Plans in ``plans/round66c/``
(template r66b_05: the parallel step doubles its gradients from step 2 on a flag); the truth
is ``python tests/adversarial/torch4_truth.py FILE 2``.

R66c-1 (false accept; R66b-3's fix bypassed): a copy of ``fnmatch.py`` loaded under a fresh
name (``importlib._bootstrap._load``, kept in ``sys.modules``), then EVERY source
``_files`` reads rewritten to an existing file no module came from, one per copy
(``/etc/passwd``, ``/etc/group``, ...; no file written): the spec's ``origin``, ``__file__``,
the spec's loader (an exact ``SourceFileLoader`` whose ``path`` is that file, or a subclass,
or any object), and each function's ``__code__`` (``co_filename`` replaced; the copy still
works). Unread: the module's ``__loader__`` (still the load's loader, path ``fnmatch.py``),
``__cached__`` / ``spec.cached`` (``fnmatch``'s ``.pyc``). r66c_01 EQUIVALENT.
R66c-3 (false accept; R66b-2's fix bypassed, without any file): the copy kept under a frozen
module's name no one imported (``__hello__``, ``__phello__``, ...), its origin ``"frozen"``, its loader importlib's ``FrozenImporter``,
``__file__`` deleted, its functions' ``co_filename`` ``"<frozen fnmatch>"`` (``<...>`` names are
skipped): the frozen rule of ``import_origin`` holds, ``_files`` is empty. r66c_04 EQUIVALENT.
R66c-2 (false accept; the ``_extension_child`` exemption, older than 0df09eeb): a hand-made
``types.ModuleType("torch._C._r66c_x<k>")``, no spec, ``__file__ = torch._C.__file__``, set as
``torch._C``'s attribute and ``sys.modules``' entry: "made by an import" (no spec, an existing
file) and exempt from ``FILE_COPY`` (a C extension's child); a counter of such modules
(r66c_02) is EQUIVALENT.
Right plans kept EQUIVALENT: a plugin loaded by path each step and dropped (r66c_03), the
examples.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.child_probe import run_child

TREE = Path(__file__).resolve().parents[2]
ROUND = Path(__file__).resolve().parent / "plans" / "round66c"

_REASONS = {
    "R66c-1": "R66c-1: a copy of fnmatch.py whose origin, __file__, spec loader and functions' "
              "co_filename are all rewritten to another existing file (one per copy) is made "
              "by an import and no file copy (__loader__ / __cached__ unread); r66c_01 "
              "EQUIVALENT",
    "R66c-3": "R66c-3: a copy of fnmatch.py kept under a frozen name no one imported "
              "(__hello__, ...), origin 'frozen', loader FrozenImporter, no __file__, "
              "functions' co_filename '<frozen fnmatch>': frozen by import_origin's rule, no "
              "file for _files; r66c_04 EQUIVALENT",
    "R66c-2": "R66c-2: a hand-made no-spec module under torch._C in torch._C's file, held by "
              "its parent and in sys.modules, is made by an import and exempt from FILE_COPY "
              "(_extension_child); a counter of them (r66c_02) EQUIVALENT",
}

_COPY = """
import json, sys, types, importlib.util, importlib._bootstrap, importlib.machinery
import torch
from spec_lang.torch_frontend.process_state import _process_state
from spec_lang.torch_frontend.step_state import state_changes
import fnmatch as HOST
FILES = ["/etc/passwd", "/etc/group"]
class Sub(importlib.machinery.SourceFileLoader):
    pass
def copy(k, how):
    name = f"r66c_{how}{k}"
    m = importlib._bootstrap._load(importlib.util.spec_from_file_location(name, HOST.__file__))
    if how == "plain":
        return m
    f = FILES[k]
    m.__spec__.origin = f
    m.__file__ = f
    m.__spec__.loader = {"pathloader": lambda: importlib.machinery.SourceFileLoader(name, f),
                         "subloader": lambda: Sub(name, f), "objloader": object}[how]()
    for v in list(vars(m).values()):
        if type(v) is types.FunctionType and v.__globals__ is vars(m):
            v.__code__ = v.__code__.replace(co_filename=f)
    return m
HOW = sys.argv[1]
copy(0, HOW)
s0 = _process_state([])
m = copy(1, HOW)
s1 = _process_state([])
assert m.fnmatch("a.py", "*.py")
print(json.dumps([c for c in sorted(state_changes(s0, s1))
                  if not c.startswith("the module __m")]))
"""


@pytest.mark.state_modules()
def test_r66c_unit_control_plain_copy_seen():
    assert run_child(_COPY, "plain") == \
        ["a module loaded from a file another loaded module came from: r66c_plain1"]


@pytest.mark.state_modules()
# (R66c-1: fixed, stop 66: __loader__, __cached__, every function's file; R66d-1)
@pytest.mark.parametrize("how", ["pathloader", "subloader", "objloader"])
def test_r66c_unit_copy_every_source_rewritten_seen(how):
    assert run_child(_COPY, how) != []


_FROZEN = """
import json, sys, types, importlib.util, importlib._bootstrap, importlib.machinery
import torch
from spec_lang.torch_frontend.process_state import _process_state
from spec_lang.torch_frontend.step_state import state_changes
import fnmatch as HOST
def copy(name):
    m = importlib._bootstrap._load(importlib.util.spec_from_file_location(name, HOST.__file__))
    m.__spec__.origin = "frozen"
    m.__spec__.loader = importlib.machinery.FrozenImporter
    del m.__file__
    for v in list(vars(m).values()):
        if type(v) is types.FunctionType and v.__globals__ is vars(m):
            v.__code__ = v.__code__.replace(co_filename="<frozen fnmatch>")
    return m
copy("__hello__")
s0 = _process_state([])
m = copy("__phello__")
s1 = _process_state([])
assert m.fnmatch("a.py", "*.py") and sys.modules["__phello__"] is m
print(json.dumps([c for c in sorted(state_changes(s0, s1))
                  if not c.startswith("the module __m")]))
"""


@pytest.mark.state_modules()
# (R66c-3: fixed, stop 66, by R66c-1's: the copy's own __loader__ / __cached__ name fnmatch.py)
def test_r66c_unit_copy_as_unused_frozen_name_seen():
    assert run_child(_FROZEN) != []


_EXT = """
import json, sys, types
import torch
from spec_lang.torch_frontend.process_state import _process_state
from spec_lang.torch_frontend.step_state import state_changes
def make(k, how):
    m = types.ModuleType(f"torch._C._r66c_x{k}")
    m.__file__ = torch._C.__file__
    setattr(torch._C, f"_r66c_x{k}", m)
    if how == "in_sys_modules":
        sys.modules[f"torch._C._r66c_x{k}"] = m
HOW = sys.argv[1]
make(0, HOW)
s0 = _process_state([])
make(1, HOW)
s1 = _process_state([])
print(json.dumps([c for c in sorted(state_changes(s0, s1))
                  if not c.startswith("the module __m")]))
"""


@pytest.mark.state_modules()
def test_r66c_unit_control_extension_child_not_in_sys_modules_seen():
    assert run_child(_EXT, "parent_only") == ["torch namespace torch._C"]


@pytest.mark.state_modules()
# (R66c-2: fixed, stop 66, as R66d-2: children of the first reading only)
def test_r66c_unit_hand_made_extension_child_seen():
    assert run_child(_EXT, "in_sys_modules") != []


def _prove(path: Path) -> int:
    from proofs.cli import prove_main  # noqa: PLC0415
    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


_WRONG = {
    "r66c_01_fnmatch_copy_every_source_rewritten_wrong.py": None,   # (R66c-1, R66c-2:
    "r66c_02_extension_child_module_counter_wrong.py": None,        # fixed, stop 66)
    "r66c_04_fnmatch_copy_as_unused_frozen_name_wrong.py": None,    # (R66c-3: fixed)
}


@pytest.mark.slow
@pytest.mark.parametrize("plan", sorted(_WRONG))
def test_r66c_wrong_plan_not_equivalent(plan, request):
    if _WRONG[plan]:
        request.applymarker(pytest.mark.xfail(strict=True, reason=_REASONS[_WRONG[plan]]))
    assert _prove(ROUND / plan) != 0


@pytest.mark.slow
@pytest.mark.parametrize("plan", ["r66c_03_plugin_loaded_by_path_each_step_right.py",
                                  "r66c_05_builtin_modules_first_imported_in_step_right.py"])
def test_r66c_right_plan_equivalent(plan):
    assert _prove(ROUND / plan) == 0


@pytest.mark.slow
@pytest.mark.parametrize("example", ["mlp_ddp.py", "gpt2_ddp.py"])
def test_r66c_examples_equivalent(example):
    assert _prove(TREE / "examples" / "torch" / example) == 0
