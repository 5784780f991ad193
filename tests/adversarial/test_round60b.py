"""Adversarial round 60b (``tests/adversarial/ATTEMPTS.md``, "Round 60b"): da25390's
``c_registries`` (``watch_atexit`` / ``_import_registration``, the gc record by code object,
``_ours``; the codec cache's keys) and ``c_data.c_value``, attacked with state the interpreter or
the OS process keeps in C that a step can set and a later step tell by behaviour (R60a-3's
pattern). Plans in ``plans/round60b/`` (template r60a_03: the step doubles the gradients from
step 2 on a flag); the truth is ``python tests/adversarial/torch4_truth.py FILE 2``.

The unit forms run in a child process: each leaves its C state behind (a cached ``Struct``, an
interned string, a registered faulthandler signal, an open descriptor, an audit hook).
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from tests.adversarial.child_probe import flag_src, probe_flags, run_child

ROUND = Path(__file__).resolve().parent / "plans" / "round60b"


def _prove(name: str) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(ROUND / name), "--jobs", "1", "--no-check"])


def _flag_src(plan: str) -> str:
    return flag_src(ROUND / plan)


# name: (plan, modules whose globals the fingerprints read)
_FLAGS = {
    "struct": ("r60b_01_struct_cache_probe_wrong.py", ["struct"]),
    "intern": ("r60b_02_intern_table_probe_wrong.py", []),
    "decimal": ("r60b_03_decimal_sticky_flag_wrong.py", ["decimal"]),
    "faulthandler": ("r60b_04_faulthandler_register_wrong.py", ["faulthandler"]),
    "sched": ("r60b_05_sched_policy_wrong.py", []),
    "fd": ("r60b_06_fd_table_wrong.py", []),
    "fnmatch": ("r60b_07_fnmatch_lru_probe_wrong.py", ["fnmatch"]),
    "prctl": ("r60b_10_prctl_timerslack_wrong.py", []),
    "referents": ("r60b_11_struct_state_by_get_referents_wrong.py", ["struct"]),
}


@functools.lru_cache(maxsize=1)
def _probes() -> dict:
    return probe_flags({k: (_flag_src(p), m) for k, (p, m) in _FLAGS.items()},
                       "import decimal, faulthandler, fnmatch, os, signal, struct, sys")


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", sorted(_FLAGS))
def test_r60b_flag_tells_step_2_from_step_1(name):
    # control: each plan's flag is False in step 1 and True in step 2 (the wrong plan's lever)
    got = _probes()[name]
    assert (got["flag1"], got["flag2"]) == (False, True)


_OPEN = pytest.mark.xfail(strict=True, reason="R60b: C state a step tells by behaviour, unread")
# fixed at stop 60: decimal (R60b-3), referents (R60b-4), sched (R60b-6), prctl (R60b-10)
_STILL_OPEN = {"struct", "intern", "fnmatch"}     # (faulthandler, fd: stop 61, c_settings)


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", [pytest.param(n, marks=_OPEN) if n in _STILL_OPEN else n
                                  for n in sorted(_FLAGS)])
def test_r60b_step_1_c_state_is_a_change(name):
    assert _probes()[name]["changes"], name


# -- the gc record: a function put into a module the train file makes as ``spec_lang.*`` -----

_MADE = """
import codecs, encodings, gc, importlib.util, json, sys, types
from spec_lang.torch_frontend import c_registries as C
C.watch_audit_hooks()
m = types.ModuleType(NAME)
sys.modules[NAME] = m
vars(m).update({"gc": gc, "codecs": codecs, "encodings": encodings})
src = '''
def c_cache():
    utf8 = codecs.lookup("utf-8")
    return [r for r in gc.get_referrers(utf8) if type(r) is dict and r is not encodings._cache
            and r.get("utf_8") is utf8][0]
'''
where = importlib.util.find_spec("spec_lang").submodule_search_locations[0] + "/r60b_made.py"
exec(compile(src, where, "exec"), vars(m))
cache = m.c_cache()
print(json.dumps({"reached": "utf_8" in cache and cache is not encodings._cache,
                  "unreadable": C.registry_texts(lambda v: False)[C.AUDIT].startswith(
                      C.UNREADABLE)}))
"""


@pytest.mark.state_modules()
def test_r60b_gc_call_from_a_made_spec_lang_module_is_recorded():
    got = run_child(_MADE.replace("NAME", "'spec_lang.r60b_made'"))
    assert got["reached"]
    assert got["unreadable"]


@pytest.mark.state_modules()
def test_r60b_control_same_function_in_a_module_of_another_name_is_recorded():
    got = run_child(_MADE.replace("NAME", "'r60b_made'"))
    assert got == {"reached": True, "unreadable": True}


# -- the proves (numbers in ATTEMPTS.md, Round 60b) ------------------------------------------

_PLANS_OPEN = [
    "r60b_01_struct_cache_probe_wrong.py",
    "r60b_02_intern_table_probe_wrong.py",
    "r60b_03_decimal_sticky_flag_wrong.py",
    "r60b_04_faulthandler_register_wrong.py",
    "r60b_05_sched_policy_wrong.py",
    "r60b_06_fd_table_wrong.py",
    "r60b_07_fnmatch_lru_probe_wrong.py",
    "r60b_08_gc_from_made_spec_lang_module_wrong.py",
    "r60b_10_prctl_timerslack_wrong.py",
    "r60b_11_struct_state_by_get_referents_wrong.py",
]


_PLANS_FIXED = {"r60b_03_decimal_sticky_flag_wrong.py", "r60b_05_sched_policy_wrong.py",
                "r60b_08_gc_from_made_spec_lang_module_wrong.py",
                "r60b_10_prctl_timerslack_wrong.py",
                "r60b_11_struct_state_by_get_referents_wrong.py",     # (stop 60)
                "r60b_04_faulthandler_register_wrong.py", "r60b_06_fd_table_wrong.py"}  # (61)


@pytest.mark.slow
@pytest.mark.parametrize("plan", [p if p in _PLANS_FIXED else pytest.param(
    p, marks=pytest.mark.xfail(strict=True, reason="R60b: EQUIVALENT")) for p in _PLANS_OPEN])
def test_r60b_prove_not_equivalent(plan):
    assert _prove(plan) != 0
