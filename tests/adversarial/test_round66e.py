"""Adversarial round 66e (``tests/adversarial/ATTEMPTS.md``, "Round 66e"): fec4b639 (rounds
66c / 66d's fixes: ``registry_state.import_origin`` (a file origin needs an exact importlib
file loader whose ``path`` is that file), ``registry_state._files`` (also the module's own
``__loader__``'s ``path``, ``source_from_cache(__cached__)``, every plain function's
``co_filename``), ``registry_state._extension_child`` (exempt only if a child at the first
reading)) attacked with fast unit probes only (CI was running: no ``prove --torch``).

R66e-1 (crash, not a false accept): ``registry_state._real`` (``os.path.realpath``) raises on
a path with an embedded NUL (``ValueError``) or a lone surrogate (``UnicodeEncodeError``);
the paths R66c/R66d's fix newly reads (``source_from_cache(__cached__)``, the module's own
``__loader__``'s ``path``) reach it unfiltered, so a hand-made ``sys.modules`` entry with
``__cached__ = "/x/__pycache__/a\\x00.cpython-311.pyc"`` (or a ``SourceFileLoader`` whose
``path`` holds ``"\\ud800"``) makes ``_process_state`` raise: ``file_copies`` says "Raises
nothing". At 1685ff52 the same module read as "the sys.modules entry r66e_m (not made by an
import)". (The same crash with ``__file__``, a spec loader's ``path`` or a function's
``co_filename`` holding a NUL is older: 1685ff52 raises too.) ``prove`` reports an internal
error (exit 2, never 0): no false accept.
"""
from __future__ import annotations

import pytest

from tests.adversarial.child_probe import run_child

_REASONS = {
    "R66e-1": "R66e-1: registry_state._real (os.path.realpath) raises ValueError / "
              "UnicodeEncodeError on a NUL / lone surrogate in a path read from __cached__ or "
              "__loader__.path (and __file__, spec loader path, co_filename): _process_state "
              "crashes (prove: internal error)",
}

_ODD = """
import sys, json, types, importlib.machinery
import torch
from spec_lang.torch_frontend.process_state import _process_state
from spec_lang.torch_frontend.step_state import state_changes
import fnmatch
HOW = sys.argv[1]
s0 = _process_state([])
m = types.ModuleType("r66e_m")
if HOW == "cached_null":
    m.__cached__ = "/x/__pycache__/a\\x00.cpython-311.pyc"
elif HOW == "cached_surrogate":
    m.__cached__ = "/x/__pycache__/\\ud800.cpython-311.pyc"
elif HOW == "loader_null":
    m.__loader__ = importlib.machinery.SourceFileLoader("r66e_m", "/x/a\\x00.py")
elif HOW == "loader_surrogate":
    m.__loader__ = importlib.machinery.SourceFileLoader("r66e_m", "/x/\\ud800.py")
elif HOW == "file_null":
    m.__file__ = "/x/a\\x00.py"
elif HOW == "spec_loader_null":
    m.__spec__ = importlib.machinery.ModuleSpec(
        "r66e_m", importlib.machinery.SourceFileLoader("r66e_m", "/x/a\\x00.py"),
        origin=fnmatch.__file__)
elif HOW == "code_null":
    exec("def g(): pass", vars(m))
    vars(m)["g"].__code__ = vars(m)["g"].__code__.replace(co_filename="/x/a\\x00.py")
sys.modules["r66e_m"] = m
try:
    s1 = _process_state([])
except Exception as e:
    print(json.dumps(["CRASH " + type(e).__name__]))
else:
    print(json.dumps([c for c in sorted(state_changes(s0, s1)) if "r66e_m" in c]))
"""


@pytest.mark.state_modules()
# (R66e-1: fixed, stop 66: _real / _exists take such a path as naming no file)
@pytest.mark.parametrize("how", ["cached_null", "cached_surrogate", "loader_null",
                                 "loader_surrogate", "file_null", "spec_loader_null",
                                 "code_null"])
def test_r66e_unit_odd_path_no_crash(how):
    changes = run_child(_ODD, how)
    assert changes and not changes[0].startswith("CRASH")


_LAZY = """
import sys, json, importlib, warnings
warnings.simplefilter("ignore")
import torch, numpy
from spec_lang.torch_frontend import registry_state as R
R.file_copies([])       # the first reading, before the lazy imports
for n in sys.argv[1].split(","):
    try:
        importlib.import_module(n)
    except BaseException:
        pass
loaded = [(k, v) for k, v in list(sys.modules.items()) if isinstance(k, str)]
print(json.dumps(sorted(R.file_copies(loaded)) +
                 [k for k, v in loaded if (R.import_origin(v) or "").startswith("a loader")]))
"""


@pytest.mark.state_modules()
def test_r66e_unit_lazy_imports_no_copy_control():
    # (control: ~2,900 modules, many libraries imported after the first reading: no file
    # copy, no loader refusal)
    mods = ("logging,dataclasses,typing,collections,matplotlib.pyplot,PIL.Image,networkx,"
            "sympy,psutil,yaml,jinja2,torch._dynamo,torch.distributed.rpc,"
            "xml.etree.ElementTree,sqlite3,ctypes,multiprocessing,asyncio,decimal,csv")
    assert run_child(_LAZY, mods) == []
