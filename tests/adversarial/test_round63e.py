"""Adversarial round 63e (``tests/adversarial/ATTEMPTS.md``, "Round 63e"): 573c1666's and
c2d33d8e's step-state fingerprint fixes (R63d-1/-2/-3/-5) attacked. Plans in
``plans/round63e/`` (template r62d_01: the parallel step doubles its gradients from step 2 on a
flag); the truth is ``python tests/adversarial/torch4_truth.py FILE 2``.

R63e-1 (false accept, new with c2d33d8e): ``c_registries._callback_text`` reads an exit
callback that is a bound method whose function is not the user's and whose object's class is a
library's (``module_members.library_class``) by ``object_text`` only (identity, own attributes
by type). The step reaches the registered object through the atexit registry itself:
``atexit.unregister(probe)`` compares every registered callback with ``probe`` (``==``), so the
probe's ``__eq__`` gets the bound method and counts in ``__self__.box[0]`` (an
``argparse.Namespace(box=[0]).__repr__`` registered at import inside a function). (A user class bound
to a library function with ``types.MethodType``, ``type(K)`` being ``type``, is seen: a control.)
R63e-2 (false refusal, R63d-1's fix, the kept Logger refusal's family): a signal handler that is
a bound method of an ``argparse.ArgumentParser`` (``parser.exit``) is read with the whole parser
(TOO_DEEP, ~179,000 characters): "signal handlers" unreadable, UNKNOWN for a right plan
(r63e_04: EQUIVALENT at 207919e6, before 573c1666).
R63e-3 (false refusal, older: not from the commits under review): a module-level
``argparse.ArgumentParser`` global (r63e_03, the commonest train-script idiom) makes every plan
UNKNOWN: "the step changes the global PARSER ... to a value prove --torch cannot compare"
(the same at 207919e6 with r63e_02).

The unit forms run a snippet in a child of its own between two ``_process_state`` fingerprints
(``child_probe.patch_flags``).
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from tests.adversarial.child_probe import patch_flags

TREE = Path(__file__).resolve().parents[2]
ROUND = Path(__file__).resolve().parent / "plans" / "round63e"

_REASONS = {
    "R63e-1": "R63e-1: an exit callback that is a library function bound to an object whose "
              "class is a library's is read by object_text only (c2d33d8e); the step reaches "
              "it through atexit.unregister's == and counts in a list on the object",
    "R63e-2": "R63e-2: a signal handler bound to an argparse.ArgumentParser is read with the "
              "whole parser (R63d-1's fix): TOO_DEEP, a right plan UNKNOWN",
    "R63e-3": "R63e-3: a module-level argparse.ArgumentParser global is a value the step "
              "state cannot compare: every plan holding one is UNKNOWN (older)",
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
def _flag():
    g = _Grab()
    atexit.unregister(g)
    return bool(g.seen) and g.seen[-1] >= 2
'''

_UNIT = {
    "atexit_argparse_namespace_method": '''
import atexit, argparse
def _mk():
    atexit.register(argparse.Namespace(box=[0]).__repr__)
_mk()
''' + _GRAB,
}
_FINDING = {"atexit_argparse_namespace_method": "R63e-1"}

# controls (seen): the same lever on a user class's object, and on a user class bound to a
# library function
_CONTROLS = {
    "atexit_library_function_bound_to_user_class": '''
import atexit, argparse, types
def _mk():
    class K:
        box = [0]
    atexit.register(types.MethodType(argparse._AttributeHolder.__repr__, K))
_mk()
''' + _GRAB,
    "atexit_user_class_method": '''
import atexit
def _mk():
    class K:
        def __init__(self):
            self.box = [0]
        def m(self):
            pass
    atexit.register(K().m)
_mk()
''' + _GRAB,
}

_NOTHING = "def _flag():\n    return False\n"
# right handlers / exit callbacks of library objects: no change expected
_RIGHT = {
    "atexit_tempdir_cleanup": "import atexit, tempfile\n_T = tempfile.TemporaryDirectory()\n"
                              "atexit.register(_T.cleanup)\n" + _NOTHING,
    "signal_tempdir_cleanup": "import tempfile\n_T = tempfile.TemporaryDirectory()\n"
                              "signal.signal(signal.SIGUSR2, _T.cleanup)\n" + _NOTHING,
    "signal_streamhandler_flush": "signal.signal(signal.SIGTERM, logging.StreamHandler().flush)\n"
                                  + _NOTHING,
    "atexit_rotating_file_handler_close":
        "import atexit, logging.handlers, tempfile, os\n_D = tempfile.TemporaryDirectory()\n"
        "atexit.register(logging.handlers.RotatingFileHandler(os.path.join("
        "_D.name, 'x.log')).close)\n" + _NOTHING,
    "signal_sched_run": "import sched\nsignal.signal(signal.SIGTERM, sched.scheduler().run)\n"
                        + _NOTHING,
    "signal_argparse_parser_exit": "import argparse\n_P = argparse.ArgumentParser()\n"
                                   "_P.add_argument('--lr', type=float, default=0.1)\n"
                                   "signal.signal(signal.SIGTERM, _P.exit)\n" + _NOTHING,
}
_RIGHT_FINDING = {"signal_argparse_parser_exit": "R63e-2"}


@functools.lru_cache(maxsize=None)
def _unit(name: str) -> dict:
    return patch_flags("r63e", {name: {**_UNIT, **_CONTROLS, **_RIGHT}[name]})[name]


def _maybe_xfail(finding: str | None) -> list:
    return [] if finding is None else [pytest.mark.xfail(strict=True, reason=_REASONS[finding])]


@pytest.mark.slow   # (the flag's lever; its change is checked by the fast test)
@pytest.mark.state_modules()
@pytest.mark.parametrize("name", sorted(_UNIT) + sorted(_CONTROLS))
def test_r63e_unit_flag_tells_step_2_from_step_1(name):
    assert (_unit(name)["flag1"], _unit(name)["flag2"]) == (False, True), _unit(name)


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", sorted(_UNIT) + sorted(_CONTROLS))
def test_r63e_unit_counter_is_a_change(name):
    """R63e-1's unit form (fixed in stop 63: ``c_registries.watch_atexit`` wraps
    ``atexit.unregister``) and the controls: a change is seen."""
    assert _unit(name)["changes"], (_REASONS.get(_FINDING.get(name)), _unit(name))


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", [pytest.param(n, marks=_maybe_xfail(_RIGHT_FINDING.get(n)))
                                  for n in sorted(_RIGHT)])
def test_r63e_unit_right_handler_no_change(name):
    assert _unit(name)["changes"] == [], (_REASONS.get(_RIGHT_FINDING.get(name)), _unit(name))


def _prove(path: Path) -> int:
    from proofs.cli import prove_main  # noqa: PLC0415
    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


@pytest.mark.slow
@pytest.mark.parametrize("plan", [
    ROUND / "r63e_01_atexit_library_object_unregister_wrong.py",
])
def test_r63e_wrong_plan_not_equivalent(plan):
    assert _prove(plan) != 0


@pytest.mark.slow
@pytest.mark.parametrize("plan,finding", [
    ("r63e_02_sigterm_argparse_parser_exit_right.py", "R63e-2"),
    ("r63e_03_module_argparse_parser_right.py", None),   # (R63e-3: fixed, stop 65: the
    ("r63e_04_sigterm_parser_exit_in_function_right.py", "R63e-2"),   # ref# of a freed
])                                                       # temporary, R65-L1)
def test_r63e_right_plan_equivalent(plan, finding, request):
    if finding:
        request.applymarker(pytest.mark.xfail(strict=True, reason=_REASONS[finding]))
    assert _prove(ROUND / plan) == 0


@pytest.mark.slow
@pytest.mark.parametrize("path", [
    TREE / "examples" / "torch" / "mlp_ddp.py",
    TREE / "examples" / "torch" / "gpt2_ddp.py",
])
def test_r63e_right_plans_equivalent(path):
    assert _prove(path) == 0
