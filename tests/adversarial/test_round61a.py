"""Adversarial round 61a (``tests/adversarial/ATTEMPTS.md``, "Round 61a"): 389d9f80 (the C
settings read through readers bound at import, R60d-4), 7e8ddcf2 (the step state read at the
real sizes only; the denormal probe off the traced graph) attacked. Plans in
``plans/round61a/`` (template r60c_03: the parallel step doubles its gradients from step 2 on a
flag); the truth is ``python tests/adversarial/torch4_truth.py FILE 2``.

R61a-1..4: ``c_settings`` binds its functions at import, but what it does with their results is
still looked up when the fingerprint runs: ``c_int.value`` (a descriptor on ctypes' Python
class), ``POINTER(c_char_p)`` (ctypes' ``_pointer_type_cache`` dict) and the builtins
``repr`` / ``sorted``. A train file that replaces one at import, answering a constant to
``c_settings`` only, hides a step counter kept in that setting. R61a-4: 7e8ddcf2's ``_flushes_denormals`` likewise
reads the flush-denormal switch through ``torch.Tensor.mul``, looked up when it runs.

The unit forms run each plan's code (from its ``H = {}`` line: the import-time patch and the
flag) in a child interpreter of its own (the patches stay in the process), between two
``_process_state`` fingerprints; the controls (the same flags, nothing patched) in one more.
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
ROUND = Path(__file__).resolve().parent / "plans" / "round61a"

PLANS = {
    "cint_value": "r61a_01_cint_value_prctl_pdeathsig_wrong.py",
    "pointer_cache": "r61a_02_pointer_cache_c_environ_wrong.py",
    "builtins_repr": "r61a_03_builtins_repr_gc_debug_wrong.py",
    "builtins_sorted": "r61a_04_builtins_sorted_sigmask_wrong.py",
    "tensor_mul": "r61a_05_tensor_mul_flush_denormal_wrong.py",
}

# each flag (step 1: False, leaving its state; step 2: True) between two process-state
# fingerprints; the source is exec'd first (a plan's import-time patch runs there), compiled
# under a file name of its own
_PROBE = """
import gc, json, sys
from spec_lang.torch_frontend import c_registries as C
from spec_lang.torch_frontend.process_state import _process_state
from spec_lang.torch_frontend.step_state import state_changes
C.watch_audit_hooks()
out = {}
for name, src in json.loads(sys.argv[1]).items():
    ns = {}
    exec(compile("import ctypes, gc, os, signal, sys\\n" + src, f"/tmp/r61a_{name}.py", "exec"),
         ns)
    s0 = _process_state(modules=[])
    a = ns["_flag"]()
    gc.collect()
    s1 = _process_state(modules=[])
    b = ns["_flag"]()
    out[name] = {"flag1": bool(a), "flag2": bool(b), "changes": sorted(state_changes(s0, s1))}
print(json.dumps(out))
"""

# the plans' flags with nothing patched (one child: none leaves a patch)
_CONTROLS = {
    "cint_value": '''
def _flag():
    _prctl = ctypes.CDLL(None).prctl
    buf = (ctypes.c_ubyte * 4)()
    _prctl(2, buf, 0, 0, 0)
    n = int.from_bytes(bytes(buf), "little")
    _prctl(1, n + 1, 0, 0, 0)
    return n > 0
''',
    "pointer_cache": '''
def _flag():
    _getenv = ctypes.CDLL(None).getenv
    _getenv.restype = ctypes.c_char_p
    v = _getenv(b"R61A_STEP")
    n = int(v or 0)
    os.putenv("R61A_STEP", str(n + 1))
    return n > 0
''',
    "builtins_repr": '''
def _flag():
    n = gc.get_debug()
    gc.set_debug(gc.DEBUG_UNCOLLECTABLE if n == 0 else n)
    return n > 0
''',
    "tensor_mul": '''
import torch


def _flag():
    n = float.fromhex("0x1p-1074") * 1.0 == 0.0
    torch.set_flush_denormal(True)
    return n
''',
    "builtins_sorted": '''
def _flag():
    n = len(signal.pthread_sigmask(signal.SIG_BLOCK, []))
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
    return n > 0
''',
}


def _plan_src(name: str) -> str:
    text = (ROUND / PLANS[name]).read_text()
    return text[text.index("\nH = {}\n"):text.index("\ndef parallelize")]


def _run(flags: dict) -> dict:
    env = {**os.environ, "PYTHONPATH": str(TREE)}
    argv = [sys.executable, "-c", _PROBE, json.dumps(flags)]
    out = subprocess.run(argv, cwd=TREE, env=env, capture_output=True, text=True, check=True,
                         timeout=600).stdout
    return json.loads(out.strip().splitlines()[-1])


@functools.lru_cache(maxsize=None)
def _patched(name: str) -> dict:
    return _run({name: _plan_src(name)})[name]


@functools.lru_cache(maxsize=1)
def _controls() -> dict:
    return _run(_CONTROLS)


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", sorted(PLANS))
def test_r61a_flag_tells_step_2_from_step_1(name):
    # the lever: False in step 1 (leaving its state), True in step 2, patched or not
    assert (_controls()[name]["flag1"], _controls()[name]["flag2"]) == (False, True)
    assert (_patched(name)["flag1"], _patched(name)["flag2"]) == (False, True)


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", sorted(PLANS))
def test_r61a_control_step_1_state_is_a_change(name):
    want = ("interpreter and torch settings" if name == "tensor_mul" else
            "interpreter and process settings kept in C")
    assert _controls()[name]["changes"] == [want]


_WHY = {
    "cint_value": "R61a-1: ctypes.c_int.value replaced at import hides prctl pointer GETs",
    "pointer_cache": "R61a-2: ctypes._pointer_type_cache[c_char_p] replaced at import hides "
                     "the C environ",
    "builtins_repr": "R61a-3: builtins.repr replaced at import hides every C setting",
    "builtins_sorted": "R61a-3: builtins.sorted replaced at import hides the signal mask",
    "tensor_mul": "R61a-4: torch.Tensor.mul replaced at import hides the flush-denormal switch "
                  "from process_state._flushes_denormals",
}


# what the fingerprint sees since stop 61 (the readers' results read without a lookup the train
# file can change; a replaced builtin makes the builtins entry unreadable)
_SEEN = {"builtins_repr": ["builtins"], "builtins_sorted": ["builtins"],
         "cint_value": ["interpreter and process settings kept in C"],
         "pointer_cache": ["interpreter and process settings kept in C"],
         "tensor_mul": ["interpreter and torch settings"]}


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", sorted(PLANS))
def test_r61a_patched_step_1_state_is_a_change(name):
    # (a strict xfail at 7db38914: changes [], _WHY[name])
    assert _patched(name)["changes"] == _SEEN[name], name


# -- proves (slow; numbers in ATTEMPTS.md, from ``/tmp/r61a/prove.sh``, 2 shared cores) --------

def _prove(name: str) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(ROUND / name), "--jobs", "1", "--no-check"])


_PROVED = {  # EQUIVALENT at 7db38914; truth step 2 w0 0.005758 w1 0.002748 w2 0.004218 for each
    "cint_value": "EQUIVALENT rc 0, 29.2 s",
    "pointer_cache": "EQUIVALENT rc 0, 30.7 s",
    "builtins_repr": "EQUIVALENT rc 0, 42.7 s",
    "builtins_sorted": "EQUIVALENT rc 0, 38.9 s",
    "tensor_mul": "EQUIVALENT rc 0, 39.1 s",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PLANS))
def test_r61a_wrong_plan_not_equivalent(name):
    # (strict xfails at 7db38914: _WHY[name], _PROVED[name]; truth step 2 w0 0.005758); since
    # stop 61 a replaced builtin is refused when the train file is imported (exit 3), the others
    # are UNKNOWN (their setting changed)
    assert _prove(PLANS[name]) != 0


@pytest.mark.slow
@pytest.mark.parametrize("example", ["mlp_ddp.py", "llama_tp.py"])
def test_r61a_right_example_stays_equivalent(example):
    from proofs.cli import prove_main

    path = TREE / "examples" / "torch" / example
    assert prove_main(["--torch", str(path), "--jobs", "1", "--no-check"]) == 0


@pytest.mark.slow
def test_r61a_06_flush_denormal_control_not_equivalent():
    # r61a_05 without the patch: UNKNOWN (interpreter and torch settings), rc 2, 31.2 s
    assert _prove("r61a_06_flush_denormal_control_wrong.py") != 0


@pytest.mark.slow
def test_r61a_07_plan_agrees_with_its_real_run():
    # a cycle collected at the probe sizes by the train file, at the real sizes by step_state:
    # the real 2-process run collects it too (truth: w2 2.2e-19 at step 2, w0 w1 0), so the
    # plan, named wrong, runs right; EQUIVALENT (rc 0, 35.6 s) agrees
    assert _prove("r61a_07_gc_cycle_collected_at_probe_sizes_wrong.py") in (0, 2)


@pytest.mark.slow
def test_r61a_09_pdeathsig_control_not_equivalent():
    # r61a_01 without the patch: UNKNOWN (interpreter and process settings kept in C), rc 2,
    # 45.0 s: the c_int.value patch is what hides it
    assert _prove("r61a_09_prctl_pdeathsig_control_wrong.py") != 0


@pytest.mark.slow
def test_r61a_08_stale_weight_at_probe_sizes_refused_by_alignment():
    # a held pre-capture weight read at the probe sizes only (no stale-reference search there
    # since 7e8ddcf2): the alignment refuses it ("the trace at real sizes runs aten.mm.default
    # where the main trace runs _param_constant0"), rc 3, 42.8 s; a user error, not internal
    assert _prove("r61a_08_stale_weight_at_probe_sizes_right.py") == 3


@pytest.mark.slow
def test_r61a_pipelined_examples():
    # 7e8ddcf2's pp_frontend: the probe-size stage jobs read no state (EQUIVALENT rc 0, 87.2 s;
    # the buggy one NOT EQUIVALENT rc 1, 96.3 s)
    from proofs.cli import prove_main

    ex = TREE / "examples" / "torch"
    assert prove_main(["--torch", str(ex / "llama_pp_dp.py"), "--jobs", "1", "--no-check"]) == 0
    assert prove_main(["--torch", str(ex / "llama_pp_dp_no_scale_grads_buggy.py"), "--jobs", "1",
                       "--no-check"]) == 1
