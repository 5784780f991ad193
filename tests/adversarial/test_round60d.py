"""Adversarial round 60d (``tests/adversarial/ATTEMPTS.md``, "Round 60d"): 297ba88's fixes of
R60c-1..5 attacked (the gc record's stack walk: a collector call is the front end's own only
with its module's globals and no train-file frame below; readers bound before the train file).
Plans in ``plans/round60d/`` (template r60c_03: the step doubles the gradients from step 2 on a
flag); the truth is ``python tests/adversarial/torch4_truth.py FILE 2``.

The unit forms run in one child interpreter (the flags leave C state behind: a key in
``int``'s dict, a collector debug flag, a gc record that stays unreadable).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TREE = Path(__file__).resolve().parents[2]
ROUND = Path(__file__).resolve().parent / "plans" / "round60d"


def _prove(name: str) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(ROUND / name), "--jobs", "1", "--no-check"])


# each flag (step 1: False, leaving its state; step 2: True) between two process-state
# fingerprints, all in one child, each in its own namespace compiled under the file name given
# (the child's own frame is the stack's bottom: exempt as ``python -c``); ``_after`` (if any)
# runs from that bottom frame after step 1, as ``step_state``'s ``gc.collect()`` does
_PROBE = """
import gc, json, sys
from spec_lang.torch_frontend import c_registries as C
from spec_lang.torch_frontend.process_state import _process_state
from spec_lang.torch_frontend.step_state import state_changes
C.watch_audit_hooks()
out = {}
for name, (src, mods, fname) in json.loads(sys.argv[1]).items():
    ns = {}
    exec(compile("import ctypes, gc, os, struct, sys, types, weakref\\n" + src, fname, "exec"),
         ns)
    s0 = _process_state(modules=mods)
    a = ns["_flag"]()
    if "_after" in ns:
        ns["_after"]()
    gc.collect()
    s1 = _process_state(modules=mods)
    b = ns["_flag"]()
    out[name] = {"flag1": bool(a), "flag2": bool(b), "changes": sorted(state_changes(s0, s1))}
    gc.collect()    # (step 2's garbage, before the next flag's first fingerprint)
print(json.dumps(out))
"""

_ENC = """
from spec_lang.torch_frontend import special_values as _sv


class _Enc:
    uncomparable = unreadable = False

    def enc(self, x):
        self.got = x
        return ""

    def _attrs(self, v):
        return ""
"""

# R60d-1: the front end's special_text run by a weakref.finalize of a cycle, collected by a
# ``gc.collect()`` whose stack holds no train-file frame (step_state's)
_FINALIZE = _ENC + """

class _Write(_Enc):
    def enc(self, x):
        x["r60d_fin"] = x.get("r60d_fin", 0) + 1
        return ""


class _Junk:
    pass


def _flag():
    hit = int.__dict__.get("r60d_fin", 0) > 0
    junk = _Junk()
    junk.me = junk
    weakref.finalize(junk, _sv.special_text, _Write(), int.__dict__)
    return hit
"""

# R60d-2: R60c-2's direct call, the flag's code compiled as ``<frozen r60d>`` (and as a venv
# file); the control: the same code compiled as ``<string>`` (recorded)
_DIRECT = _ENC + """

def _flag():
    e = _Enc()
    _sv.special_text(e, int.__dict__)
    n = e.got.get(KEY, 0)
    e.got[KEY] = n + 1
    return n > 0
"""

# R60d-3 (unit only, R60c-4's family): ``gc.get_debug`` still looked up at call time by
# ``c_settings``; rebound at import, the step's collector debug flag is unseen
_GC_DEBUG_REBOUND = """
_get_debug = gc.get_debug
gc.get_debug = lambda: 0


def _flag():
    hit = bool(_get_debug() & gc.DEBUG_UNCOLLECTABLE)
    gc.set_debug(gc.DEBUG_UNCOLLECTABLE)
    return hit
"""
_GC_DEBUG_CONTROL = _GC_DEBUG_REBOUND.replace("gc.get_debug = lambda: 0", "").replace(
    "DEBUG_UNCOLLECTABLE", "DEBUG_COLLECTABLE")

_VENV_FILE = os.path.join(sys.prefix, "lib", "r60d_step.py")
# R60d-3: a train file whose directory is under spec_lang/ or the venv: its own frames are
# exempt from the walk (the roots the probe is given)
_ROOTS = [os.path.join(TREE, "spec_lang", "r60d", ""), os.path.join(sys.prefix, "r60d", "")]

# name: (source of ``_flag``, modules whose globals the fingerprints read, file name)
_FLAGS = {
    "finalize_special_text": (_FINALIZE, [], "<string>"),
    "frozen_name_special_text": ("KEY = 'r60d_frozen'\n" + _DIRECT, [], "<frozen r60d>"),
    "venv_name_special_text": ("KEY = 'r60d_venv'\n" + _DIRECT, [], _VENV_FILE),
    "train_file_in_spec_lang": ("KEY = 'r60d_ours'\n" + _DIRECT, [], _ROOTS[0] + "train.py"),
    "train_file_in_venv": ("KEY = 'r60d_venv_root'\n" + _DIRECT, [], _ROOTS[1] + "train.py"),
    "gc_debug_control": (_GC_DEBUG_CONTROL, ["gc"], "<string>"),
    # (last but one: it rebinds what the fingerprint calls, for the rest of the child)
    "y_gc_debug_rebound": (_GC_DEBUG_REBOUND, ["gc"], "<string>"),
    # (the very last: a recorded gc call leaves the audit entry unreadable for good)
    "zz_string_name_special_text": ("KEY = 'r60d_string'\n" + _DIRECT, [], "<string>"),
}


@functools.lru_cache(maxsize=1)
def _probes() -> dict:
    env = {**os.environ, "PYTHONPATH": str(TREE)}
    argv = [sys.executable, "-c", _PROBE, json.dumps(_FLAGS), json.dumps(_ROOTS)]
    out = subprocess.run(argv, cwd=TREE, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", sorted(_FLAGS))
def test_r60d_flag_tells_step_2_from_step_1(name):
    # control: each flag is False in step 1 and True in step 2 (the wrong plan's lever)
    got = _probes()[name]
    assert (got["flag1"], got["flag2"]) == (False, True)


_OPEN = pytest.mark.xfail(strict=True, reason="R60d: a step's flag unseen by the fingerprint")
# (stop 60 took 297ba88's stack walk back, R60d-6: every plan was UNKNOWN; the train file
# calling our functions directly, R60c-2, is open in every form, the `<string>` one too)
_STILL_OPEN = {"finalize_special_text", "frozen_name_special_text", "venv_name_special_text",
               "train_file_in_spec_lang", "train_file_in_venv",
               "zz_string_name_special_text"}


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", [pytest.param(n, marks=_OPEN) if n in _STILL_OPEN else n
                                  for n in sorted(_FLAGS)])
def test_r60d_step_1_state_is_a_change(name):
    assert _probes()[name]["changes"], name


# -- proves (slow; numbers in ATTEMPTS.md, from ``/tmp/dbg/w.sh``) ---------------------------

@pytest.mark.slow
@pytest.mark.parametrize("example", ["gpt2_ddp.py", "llama_tp.py"])   # (R60d-6 fixed, stop 60)
def test_r60d_right_example_stays_equivalent(example):
    from proofs.cli import prove_main

    path = TREE / "examples" / "torch" / example
    assert prove_main(["--torch", str(path), "--jobs", "1", "--no-check"]) == 0


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R60c-2 open (the train file calling our functions): "
                   "EQUIVALENT rc 0, 60.4 s; truth step 2 w0 0.005758")
def test_r60d_2_wrong_plan_not_equivalent():
    assert _prove("r60d_02_step_compiled_as_frozen_wrong.py") != 0


@pytest.mark.slow
def test_r60d_1_plan_agrees_with_its_real_run():
    # its finalizer runs at the capture's collection only: the real 2-process run shows no
    # difference at step 2 either (truth: w2 2.2e-19, w0 w1 0), so the plan, named wrong, is
    # right as it runs, and EQUIVALENT (rc 0, 64.7 s at stop 60) agrees; never refuted
    assert _prove("r60d_01_gc_by_finalize_of_our_special_text_wrong.py") in (0, 2)
