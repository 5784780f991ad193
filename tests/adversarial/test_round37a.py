"""Adversarial round 37a (``tests/adversarial/ATTEMPTS.md``, "Round 37a"), against wip/adv37a
at faf97b6 (= main: bf20a71, ``lower._write_back`` leaves Opaque a reader pass 1 could not name,
``aliasing.named_path``; faf97b6, a program started in the train file's code refused
(``thread_guard._starters``), ``monitored_barrier`` refused even if caught, a ``new_group`` made
while ``torch.distributed`` differs from ``pp_guard``'s snapshot no axis, a ``new_group`` with a
negative timeout / a changed backend environment / raising in the capture refused). Plans in
``plans/round37a/``. Truth: ``tests/adversarial/torch4_truth.py FILE 1`` (dp 2, gloo, float64).

* R37a-1 (false accept; ``r37a_02``, ``r37a_03``): R36c-2's child process started through a
  route ``thread_guard._starters`` does not wrap: ``posix.system`` (the same builtin as
  ``os.system``, reached through ``os``'s C module) and libc's ``system()`` through ``ctypes``.
* R37a-2 (false accept; ``r37a_04``): the mirror of R36c-3: an error gloo raises and the fake
  backend does not (``ReduceOp.BAND`` on a float tensor of the step), caught.
* R37a-3 (false accept; ``r37a_05``): R36c-2's child process started when the train file is
  imported: ``thread_guard`` wraps the starters only while the capture runs the train file's
  functions, ``fake_answers.importing`` records stores and collectives, not processes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND37A = Path(__file__).resolve().parent / "plans" / "round37a"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND37A / name, tmp_path)


# -- findings (strict xfails: open) -------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R37a-1: a program started by posix.system (not "
                   "os.system) in the train file's code is not refused")
def test_r37a_1_posix_system_tcpstore_is_not_accepted(tmp_path):
    """EQUIVALENT at faf97b6 (4 goals, 161 s); truth w1 0.0070, w2 0.0093."""
    out = _prove("r37a_02_dp_posix_system_tcpstore_client_count_lr.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R37a-1: a program started by libc's system() through "
                   "ctypes in the train file's code is not refused")
def test_r37a_1_ctypes_libc_system_tcpstore_is_not_accepted(tmp_path):
    """EQUIVALENT at faf97b6 (4 goals, 129 s); truth w1 0.0070, w2 0.0093."""
    out = _prove("r37a_03_dp_ctypes_libc_system_tcpstore_client_count_lr.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R37a-2: an error gloo raises and the fake backend does "
                   "not (ReduceOp.BAND on a float tensor), caught")
def test_r37a_2_band_float_caught_is_not_accepted(tmp_path):
    """EQUIVALENT at faf97b6 (4 goals, 161 s); truth w1 0.0088, w2 0.018."""
    out = _prove("r37a_04_dp_band_float_flag_caught_skip_allreduce_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R37a-3: a program started when the train file is "
                   "imported is not refused (thread_guard's window is the capture's)")
def test_r37a_3_import_time_subprocess_tcpstore_is_not_accepted(tmp_path):
    """EQUIVALENT at faf97b6 (4 goals, 204 s); truth w1 0.0070, w2 0.0093."""
    out = _prove("r37a_05_dp_import_time_subprocess_tcpstore_count_lr.py", tmp_path)
    assert _not_accepted(out), out


# -- sound or right outcomes worth keeping --------------------------------------------------------

@pytest.mark.slow
def test_r37a_timedelta_max_timeout_caught_is_not_accepted(tmp_path):
    """``new_group(..., backend="gloo", timeout=timedelta.max)`` caught: gloo raises (the count
    overflows), and so does the capture's group construction: exit 3 (53 s); truth w1 0.0088,
    w2 0.018."""
    out = _prove("r37a_01_dp_gloo_timedelta_max_timeout_caught_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "dist.new_group raised in the capture" in out["_err"], out
