"""Adversarial round 60c (``tests/adversarial/ATTEMPTS.md``, "Round 60c"): c2de196's fixes of
R60b-3/4/6/9/10 attacked (the gc record's code set taken once in ``watch_audit_hooks``; the
decimal flags; the scheduling policy and ``prctl`` reads). Plans in ``plans/round60c/``
(template r60b_11 / r60b_10: the step doubles the gradients from step 2 on a flag); the truth
is ``python tests/adversarial/torch4_truth.py FILE 2``.

The unit forms run in one child interpreter (the flags leave C state behind: a thread name, a
key in ``int``'s dict, an audit hook).
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from tests.adversarial.child_probe import flag_src, probe_flags, run_child

ROUND = Path(__file__).resolve().parent / "plans" / "round60c"


def _prove(name: str) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(ROUND / name), "--jobs", "1", "--no-check"])


def _flag_src(plan: str) -> str:
    return flag_src(ROUND / plan)


# the control of R60c-1 and R60c-2: the same store reached by the train file's own gc call
# (recorded)
_INT_DICT_DIRECT = """
def _flag():
    d = gc.get_referents(int.__dict__)[0]
    n = d.get("r60c_direct", 0)
    d["r60c_direct"] = n + 1
    return n > 0
"""

# R60c-4's other two readers: ``os.sched_getscheduler`` and ``ctypes.CDLL`` rebound at import
_SCHED_REBOUND = """
_getscheduler = os.sched_getscheduler
os.sched_getscheduler = lambda pid: os.SCHED_OTHER


def _flag():
    hit = _getscheduler(0) == os.SCHED_BATCH
    os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    return hit
"""
_CDLL_REBOUND = """
_RealCDLL = ctypes.CDLL


class _CDLL(_RealCDLL):
    def __init__(self, name, *args, **kwargs):
        if name is None:
            raise OSError("r60c")
        super().__init__(name, *args, **kwargs)


ctypes.CDLL = _CDLL


def _flag():
    libc = _RealCDLL(None)
    hit = libc.prctl(30, 0, 0, 0, 0) == 50003      # PR_GET_TIMERSLACK
    libc.prctl(29, 50003, 0, 0, 0)
    return hit
"""

# R60c-5's other subclasses: an ``itertools.count`` (its position) and an ``mmap`` (its bytes)
_COUNT_SUBCLASS = """
import itertools


class _Count(itertools.count):
    pass


struct.r60c_count = _Count()


def _flag():
    return next(struct.r60c_count) > 0
"""
_MMAP_SUBCLASS = """
import mmap


class _Map(mmap.mmap):
    pass


struct.r60c_map = _Map(-1, 16)


def _flag():
    hit = struct.r60c_map[0] == 1
    struct.r60c_map[0] = 1
    return hit
"""

# a right step computing with ``decimal`` (Inexact set by its first step, on both sides alike)
_DECIMAL_IN_STEP = """
decimal.getcontext().clear_flags()
_calls = []


def _flag():
    decimal.Decimal(1) / decimal.Decimal(3)
    _calls.append(1)
    return len(_calls) > 1
"""

# name: (source of ``_flag``, modules whose globals the fingerprints read)
_FLAGS = {
    "laundered": (_flag_src("r60c_01_gc_laundered_by_our_code_wrong.py"), ["struct"]),
    "thread_name": (_flag_src("r60c_02_prctl_thread_name_wrong.py"), []),
    "int_dict": (_flag_src("r60c_03_static_type_dict_by_our_special_text_wrong.py"), []),
    # (the plans hold the object as a train-file global; here a library module holds it)
    "bytesio_subclass": (_flag_src("r60c_05_bytesio_subclass_position_wrong.py")
                         + "\nstruct.r60c_held = _BUF\n", ["struct"]),
    "count_subclass": (_COUNT_SUBCLASS, ["struct"]),
    "mmap_subclass": (_MMAP_SUBCLASS, ["struct"]),
    "context_subclass": (_flag_src("r60c_06_decimal_context_subclass_flag_wrong.py")
                         + "\nstruct.r60c_held2 = _CTX\n", ["struct"]),
    # (a change: a right step's first Decimal division is UNKNOWN since c2de196, as R59a-4's
    # first codec lookup; noted, not a finding)
    "decimal_in_step": (_DECIMAL_IN_STEP, ["decimal"]),
    # (last: they rebind what the fingerprint calls, for the rest of the child)
    "z_decimal_rebound": (_flag_src("r60c_04_decimal_getcontext_rebound_wrong.py"),
                          ["decimal"]),
    "z_sched_rebound": (_SCHED_REBOUND, ["os"]),
    "z_cdll_rebound": (_CDLL_REBOUND, ["ctypes"]),
    # (the very last: a recorded gc call leaves the audit entry unreadable for good)
    "zz_int_dict_direct": (_INT_DICT_DIRECT, []),
}


@functools.lru_cache(maxsize=1)
def _probes() -> dict:
    return probe_flags(_FLAGS, "import ctypes, decimal, gc, os, struct, sys, types")


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", sorted(_FLAGS))
def test_r60c_flag_tells_step_2_from_step_1(name):
    # control: each flag is False in step 1 and True in step 2 (the wrong plan's lever)
    got = _probes()[name]
    assert (got["flag1"], got["flag2"]) == (False, True)


_OPEN = pytest.mark.xfail(strict=True, reason="R60c: a step's flag unseen by the fingerprint")
# all seen at stop 60 (R60c-2's unit form too; its prove, r60c_03, is still an open xfail)
_STILL_OPEN: set[str] = set()


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", [pytest.param(n, marks=_OPEN) if n in _STILL_OPEN else n
                                  for n in sorted(_FLAGS)])
def test_r60c_step_1_state_is_a_change(name):
    assert _probes()[name]["changes"], name


# -- the gc record: the front end's own gc calls stay unrecorded (no false UNKNOWN) ----------

_OWN_CALLS = """
import json, sys, types
from spec_lang.torch_frontend import c_registries as C
C.watch_audit_hooks()
from spec_lang.torch_frontend.value_text import deep_text
deep_text(types.SimpleNamespace(a=[1, 2], b={"k": (3,)}))
deep_text(sys.modules["_struct"])
print(json.dumps({"reads": list(C._GC_READS)}))
"""


@pytest.mark.state_modules()
def test_r60c_control_front_end_gc_calls_unrecorded():
    assert run_child(_OWN_CALLS) == {"reads": []}


# -- the proves (numbers in ATTEMPTS.md, Round 60c) ------------------------------------------

# plan: EQUIVALENT at c2de196 (a false accept, fixed at stop 60)
_PLANS = {
    "r60c_01_gc_laundered_by_our_code_wrong.py": True,
    "r60c_02_prctl_thread_name_wrong.py": True,
    "r60c_03_static_type_dict_by_our_special_text_wrong.py": True,
    "r60c_04_decimal_getcontext_rebound_wrong.py": False,      # (a lambda: UNKNOWN)
    "r60c_05_bytesio_subclass_position_wrong.py": False,       # (a train-file global: UNKNOWN)
    "r60c_06_decimal_context_subclass_flag_wrong.py": False,   # (a train-file global: UNKNOWN)
    "r60c_07_bytesio_subclass_in_library_module_wrong.py": True,
    "r60c_08_decimal_context_subclass_in_library_module_wrong.py": True,
    "r60c_09_decimal_getcontext_rebound_to_copy_wrong.py": False,      # (UNKNOWN)
}


@pytest.mark.slow
@pytest.mark.parametrize("plan", [pytest.param(p, marks=pytest.mark.xfail(
    strict=True, reason="R60c-2: EQUIVALENT")) if p.startswith("r60c_03") else pytest.param(
    p, marks=pytest.mark.xfail(strict=True, reason="R11-5 family: a library module's global "
                               "is read by its type only (EQUIVALENT at stop 60)"))
    if p.startswith(("r60c_07", "r60c_08")) else p
    for p in _PLANS])     # (the others not EQUIVALENT since stop 60)
def test_r60c_prove_not_equivalent(plan):
    assert _prove(plan) != 0
