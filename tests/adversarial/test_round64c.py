"""Adversarial round 64c (``tests/adversarial/ATTEMPTS.md``, "Round 64c"): fc098f2b (round
64b's fixes: only exit callbacks registered before the train file ran, ``_PRESENT``, are read by
identity, every other one in full; the audit hook records "ctypes.cdata/buffer" too;
``_from_user`` compares ``__module__`` as text) attacked. Plans in ``plans/round64c/`` (right
plans from ``examples/torch/mlp_ddp.py``).

R64c-1 (false refusal, new with fc098f2b's "ctypes.cdata/buffer"): a right plan that parses a
fixed-layout binary header at import with a ``ctypes.Structure``'s ``from_buffer_copy`` (or a
library doing so: z3's ``SortRef.as_ast``) makes the audit entry unreadable in every
fingerprint: UNKNOWN, with a message blaming the step ("changed during train_step") for a call
made once at import (r64c_01).
R64c-2 (false refusal, older: 15ba917d's "ctypes.cdata"): a ``multiprocessing.Value`` /
``Array`` made at import (``sharedctypes`` builds it with ``from_buffer``, which raises
"ctypes.cdata"): the same (r64c_02).
R64c-3 (false refusal, new with fc098f2b): ``import z3`` at the top of a train file: z3's
import registers ``_file_manager.close`` (an ``ExitStack``'s bound method; the case the
code's own comment names as the reason for reading by identity) after the train file started,
so it is read in full: TOO_DEEP (importlib.resources' ``as_file`` generator frames), the exit
callbacks unreadable on both sides (r64c_04; plus R64c-1 when z3 is used, r64c_03). The
capture child itself imports z3 after ``watch_atexit`` (through torch's
``torch.fx.experimental.validator``), so **every** plan is UNKNOWN at fc098f2b:
``examples/torch/mlp_ddp.py`` and ``gpt2_ddp.py`` (EQUIVALENT at fc098f2b^).

The unit forms run a snippet in a child of their own between two ``_process_state``
fingerprints (``child_probe.patch_flags``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.adversarial.child_probe import patch_flags

TREE = Path(__file__).resolve().parents[2]
ROUND = Path(__file__).resolve().parent / "plans" / "round64c"

_REASONS = {
    "R64c-1": "R64c-1: ctypes' from_buffer_copy at import (a Structure parsed from a binary "
              "header; z3's SortRef.as_ast) records 'ctypes.cdata/buffer': the audit entry "
              "is unreadable in every fingerprint, a right plan UNKNOWN (new with fc098f2b)",
    "R64c-2": "R64c-2: multiprocessing.Value / Array made at import (sharedctypes' "
              "from_buffer raises 'ctypes.cdata'): the audit entry unreadable, a right plan "
              "UNKNOWN (older: 15ba917d); the plan r64c_02 exits 3 before that: the capture's "
              "sandbox denies /dev/shm (PermissionError making the Value)",
    "R64c-3": "R64c-3: import z3 in the train file: its exit callback _file_manager.close "
              "(an ExitStack's bound method) is registered after the train file started and "
              "read in full, TOO_DEEP: the exit callbacks unreadable, a right plan UNKNOWN "
              "(new with fc098f2b)",
}

# right snippets: their import-time code, then a step that changes nothing
_RIGHT_UNITS = {
    "ctypes_header_from_buffer_copy_at_import": ('''
import struct
class _Header(ctypes.Structure):
    _fields_ = [("magic", ctypes.c_uint32), ("version", ctypes.c_uint32),
                ("count", ctypes.c_uint64)]
def _read_count(raw):
    return int(_Header.from_buffer_copy(raw).count)
N_RECORDS = _read_count(struct.pack("<IIQ", 0x53484152, 1, 4096))
def _flag():
    return False
''', None),     # (R64c-1: fixed in stop 64)
    "mp_value_at_import": ('''
import multiprocessing as mp
SEEN = mp.Value("i", 0)
def _flag():
    return False
''', None),     # (R64c-2: fixed in stop 64)
    "mp_array_at_import": ('''
import multiprocessing as mp
LR = mp.Array("d", [0.1, 0.01])
def _flag():
    return False
''', None),     # (R64c-2: fixed in stop 64)
    "numpy_as_ctypes_at_import": ('''
import numpy as np, numpy.ctypeslib as npc
A = np.zeros(4)
C_A = npc.as_ctypes(A)
def _flag():
    return False
''', None),     # (R64c-2: fixed in stop 64)
    "import_z3_only": ('''
import z3
def _flag():
    return False
''', None),     # (R64c-3: fixed in stop 64)
    # torch's own module that imports z3 (the capture child imports it after watch_atexit:
    # mlp_ddp.py UNKNOWN)
    "import_torch_fx_validator": ('''
import torch.fx.experimental.validator
def _flag():
    return False
''', None),     # (R64c-3: fixed in stop 64)
    # controls (held): libraries whose import registers a plain function as exit callback
    # (read in full now: their module globals are an entry of their own)
    "import_huggingface_hub": ('''
import huggingface_hub
def _flag():
    return False
''', None),
    "filelock_in_step": ('''
import filelock, tempfile
D = tempfile.mkdtemp()
def _flag():
    with filelock.FileLock(D + "/ckpt.lock"):
        pass
    return False
''', None),
    "pil_image_in_step": ('''
import PIL.Image
def _flag():
    PIL.Image.new("RGB", (8, 8)).resize((4, 4))
    return False
''', None),
    "matplotlib_pyplot_import": ('''
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
def _flag():
    return False
''', None),
    "numpy_as_array_of_ctypes_buffer": ('''
import numpy as np, numpy.ctypeslib as npc
BUF = (ctypes.c_double * 4)()
A = npc.as_array(BUF)
def _flag():
    return False
''', None),
    # controls (held): ordinary exit callbacks a train file registers (read in full)
    "rmtree_tempdir_exit_callback": ('''
import atexit, shutil, tempfile
TMP = tempfile.mkdtemp()
atexit.register(shutil.rmtree, TMP, ignore_errors=True)
def _flag():
    open(TMP + "/x", "w").write("1")
    return False
''', None),
    "partial_save_path_exit_callback": ('''
import atexit, functools, json, tempfile
CKPT = tempfile.mkdtemp() + "/last.json"
def _save(path):
    with open(path, "w") as f:
        json.dump({"done": True}, f)
atexit.register(functools.partial(_save, CKPT))
def _flag():
    return False
''', None),
    "logging_shutdown_registered_again": ('''
import atexit, logging
atexit.register(logging.shutdown)
logging.basicConfig(level=logging.INFO)
def _flag():
    logging.getLogger("r64c").info("step")
    return False
''', None),
    "tempdir_cleanup_exit_callback": ('''
import atexit, tempfile
def _mk():
    d = tempfile.TemporaryDirectory()
    atexit.register(d.cleanup)
_mk()
def _flag():
    return False
''', None),
}


def _maybe_xfail(finding: str | None) -> list:
    return [] if finding is None else [pytest.mark.xfail(strict=True, reason=_REASONS[finding])]


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", [pytest.param(n, marks=_maybe_xfail(_RIGHT_UNITS[n][1]))
                                  for n in sorted(_RIGHT_UNITS)])
def test_r64c_unit_right_snippet_no_change(name):
    try:
        got = patch_flags("r64c", {name: _RIGHT_UNITS[name][0]})[name]
    except subprocess.CalledProcessError as e:
        pytest.fail(f"the fingerprint raised: {e.stderr[-400:]}")
    assert got["changes"] == [], (_REASONS.get(_RIGHT_UNITS[name][1]), got)


def _prove(path: Path) -> int:
    from proofs.cli import prove_main  # noqa: PLC0415
    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


# (R64c-1..3 fixed in stop 64; r64c_01 keeps an older refusal: a ctypes Structure class as a
# train-file global cannot be read; r64c_02 is refused by the prove sandbox, /dev/shm)
_REASONS["older-structure"] = ("older (0767c9ca too): a module-level ctypes.Structure class "
                               "in the train file's globals cannot be read: UNKNOWN")
_REASONS["older-z3-global"] = ("older: a z3 value kept as a train-file global (_f) cannot be "
                               "read (a C object): UNKNOWN, whatever the exit callbacks")
_REASONS["sandbox"] = ("multiprocessing.Value needs /dev/shm, which the prove sandbox does not "
                       "let the train file write: exit 3")
_RIGHT = {
    "r64c_01_ctypes_header_from_buffer_copy_at_import_right.py": "older-structure",
    "r64c_02_mp_value_at_import_right.py": "sandbox",
    "r64c_03_import_z3_at_import_right.py": "older-z3-global",
    "r64c_04_import_z3_only_right.py": None,
    "r64c_05_ctypes_local_header_from_buffer_copy_at_import_right.py": None,
}


@pytest.mark.slow
@pytest.mark.parametrize("plan", [pytest.param(p, marks=_maybe_xfail(_RIGHT[p]))
                                  for p in sorted(_RIGHT)])
def test_r64c_right_plan_equivalent(plan):
    assert _prove(ROUND / plan) == 0


@pytest.mark.slow      # (R64c-3: fixed in stop 64, library_files)
@pytest.mark.parametrize("path", [
    TREE / "examples" / "torch" / "mlp_ddp.py",
    TREE / "examples" / "torch" / "gpt2_ddp.py",
])
def test_r64c_examples_equivalent(path):
    assert _prove(path) == 0
