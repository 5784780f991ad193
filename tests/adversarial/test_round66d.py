"""Adversarial round 66d (``tests/adversarial/ATTEMPTS.md``, "Round 66d"): 0df09eeb (round
66b's fixes: ``registry_state.import_origin`` (built-in / frozen only with importlib's own
importer and ``sys.modules[spec.name] is mod``), ``registry_state.file_copies`` / ``_files``
(origin, exact file loader's ``path``, ``__file__``, first plain function's ``co_filename``),
``NAMESPACE_FILLS`` lines per cached overload) attacked. Plans in ``plans/round66d/``
(template r66b_05: the parallel step doubles its gradients from step 2 on a flag); the truth
is ``python tests/adversarial/torch4_truth.py FILE 2``.

R66d-1 (false accept; R66b-3's fix bypassed): a copy of a library file that defines no plain
function (``keyword.py``), loaded under a fresh name, its spec's loader replaced after the
load (``object()``, or a ``SourceFileLoader`` subclass from the start: not an exact file
loader, its ``path`` unread), its origin rewritten to an existing file no module came from
(one per copy), ``__file__`` deleted: ``_files`` finds no source shared with ``keyword``, and
``import_origin`` takes it as an import's (r66d_01). ``fnmatch.py`` with its functions deleted
too.
R66d-2 (false accept; the ``_extension_child`` exemption): a hand-made ``types.ModuleType``
without a spec whose ``__file__`` is a C extension's file (``torch._C``'s, or
``numpy.linalg._umath_linalg``'s), held by that extension module under its last name and put
into ``sys.modules`` as its submodule: an import's (an existing ``__file__``), exempt from
``file_copies``, and a new module: a counter of such modules is unseen (r66d_02).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.child_probe import run_child

TREE = Path(__file__).resolve().parents[2]
ROUND = Path(__file__).resolve().parent / "plans" / "round66d"

_REASONS = {
    "R66d-1": "R66d-1: a copy of keyword.py (no plain function) with its spec's loader "
              "replaced / a SourceFileLoader subclass, origin rewritten to another existing "
              "file per copy and __file__ deleted is made by an import and no file copy; "
              "r66d_01 EQUIVALENT",
    "R66d-2": "R66d-2: a hand-made no-spec module with a C extension's __file__, held by the "
              "extension module and in sys.modules as its child, is exempt (_extension_child) "
              "and a new module; r66d_02 EQUIVALENT",
}

_COPY = """
import json, sys, importlib.util, importlib._bootstrap, importlib.machinery, types
import torch
from spec_lang.torch_frontend.process_state import _process_state
from spec_lang.torch_frontend.step_state import state_changes
import keyword as KW, fnmatch as FN
class L(importlib.machinery.SourceFileLoader):
    pass
FILES = ["/etc/passwd", "/etc/group", "/etc/hosts"]
def copy(k, how):
    name = f"r66d_{how}{k}"
    host = FN.__file__ if how.startswith("fn") else KW.__file__
    if how in ("sub", "fn_sub"):
        spec = importlib.util.spec_from_file_location(name, host, loader=L(name, host))
    else:
        spec = importlib.util.spec_from_file_location(name, host)
    m = importlib._bootstrap._load(spec)
    if how == "plain":
        return
    m.__spec__.origin = FILES[k]
    vars(m).pop("__file__", None)
    if how == "obj_loader":
        m.__spec__.loader = object()
    if how == "fn_sub":
        for a, v in list(vars(m).items()):
            if isinstance(v, types.FunctionType):
                del vars(m)[a]
HOW = sys.argv[1]
copy(0, HOW)
s0 = _process_state([])
copy(1, HOW)
s1 = _process_state([])
print(json.dumps([c for c in sorted(state_changes(s0, s1))
                  if not c.startswith("the module __m")]))
"""


@pytest.mark.state_modules()
@pytest.mark.parametrize("how", ["plain", "other"])
def test_r66d_unit_control_copy_seen(how):
    # (an exact file loader's path still names keyword.py: seen; "other" is also no import's
    # since R66d-1's fix: its loader's path is not its origin)
    changes = run_child(_COPY, how)
    assert f"a module loaded from a file another loaded module came from: r66d_{how}1" in changes
    assert changes[1:] == ([] if how == "plain" else
                           [f"the sys.modules entry r66d_{how}1 (not made by an import)"])


@pytest.mark.state_modules()
# (R66d-1: fixed, stop 66)
@pytest.mark.parametrize("how", ["obj_loader", "sub", "fn_sub"])
def test_r66d_unit_copy_without_function_or_file_loader_seen(how):
    assert run_child(_COPY, how) != []


_CHILD = """
import json, sys, types
import torch, numpy
import numpy.linalg._umath_linalg as UL
from spec_lang.torch_frontend.process_state import _process_state
from spec_lang.torch_frontend.step_state import state_changes
HOW = sys.argv[1]
def make(k):
    parent, pname = (torch._C, "torch._C") if HOW == "torchC" else \\
        (UL, "numpy.linalg._umath_linalg")
    m = types.ModuleType(f"{pname}.r66d_x{k}")
    m.__file__ = parent.__file__
    setattr(parent, f"r66d_x{k}", m)
    sys.modules[f"{pname}.r66d_x{k}"] = m
make(0)
s0 = _process_state([])
make(1)
s1 = _process_state([])
print(json.dumps([c for c in sorted(state_changes(s0, s1))
                  if not c.startswith("the module __m")]))
"""


@pytest.mark.state_modules()
# (R66d-2: fixed, stop 66)
@pytest.mark.parametrize("how", ["torchC", "numpy"])
def test_r66d_unit_hand_made_extension_child_seen(how):
    assert run_child(_CHILD, how) != []


def _prove(path: Path) -> int:
    from proofs.cli import prove_main
    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


_WRONG = {     # (R66d-1, R66d-2: fixed, stop 66)
    "r66d_01_keyword_copy_loader_replaced_origin_rewritten_wrong.py": None,
    "r66d_02_extension_child_made_by_hand_wrong.py": None,
}


@pytest.mark.slow
@pytest.mark.parametrize("plan", sorted(_WRONG))
def test_r66d_wrong_plan_not_equivalent(plan, request):
    if _WRONG[plan]:
        request.applymarker(pytest.mark.xfail(strict=True, reason=_REASONS[_WRONG[plan]]))
    assert _prove(ROUND / plan) != 0


@pytest.mark.slow
@pytest.mark.parametrize("example", ["mlp_ddp.py", "gpt2_ddp.py"])
def test_r66d_examples_equivalent(example):
    assert _prove(TREE / "examples" / "torch" / example) == 0
