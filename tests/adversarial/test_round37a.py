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
* R37a-4 (false refusal; ``r37a_07``): torchtitan's ``TORCH_NCCL_*`` variables set before a
  ``new_group`` refuse it.
* R37a-5 (false refusal, a regression of faf97b6; ``r37a_06``, and ``r35c_05``): ``_tampered``
  compares with ``pp_guard``'s snapshot without the capture's own pipelining patches, so it is
  True in every capture: no ``new_group`` is an axis, ``backend="gloo"`` is made as a real gloo
  group on the fake store (exit 3). It hides R37a-6..8 (``r37a_01``, ``r37a_08``, ``r37a_09``:
  exit 3 now because the capture's real gloo group raises too).
* R37a-9 (false accept; ``r37a_10``): R36d-1 through the train file's own ``init_device_mesh``
  (``device_mesh`` holds torch's ``new_group``, bound before ``new_groups.watch``).
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


# -- findings: R37a-1, -3 fixed (asserted), R37a-2 open (strict xfail) ---------------------------

@pytest.mark.slow
def test_r37a_1_posix_system_tcpstore_is_not_accepted(tmp_path):
    """EQUIVALENT at faf97b6 (4 goals, 161 s); truth w1 0.0070, w2 0.0093.
    Fixed (R37a-1, ``thread_guard.children_now``): exit 3 (42 s)."""
    out = _prove("r37a_02_dp_posix_system_tcpstore_client_count_lr.py", tmp_path)
    assert out["_rc"] == 3 and "a process ran while the capture ran the train file's code" \
        in out["_err"], out


@pytest.mark.slow
def test_r37a_1_ctypes_libc_system_tcpstore_is_not_accepted(tmp_path):
    """EQUIVALENT at faf97b6 (4 goals, 129 s); truth w1 0.0070, w2 0.0093.
    Fixed (R37a-1): exit 3 (44 s)."""
    out = _prove("r37a_03_dp_ctypes_libc_system_tcpstore_client_count_lr.py", tmp_path)
    assert out["_rc"] == 3 and "a process ran while the capture ran the train file's code" \
        in out["_err"], out


@pytest.mark.slow
def test_r37a_2_band_float_caught_is_not_accepted(tmp_path):
    """EQUIVALENT at faf97b6 (4 goals, 161 s); truth w1 0.0088, w2 0.018. Fixed (R37a-2,
    ``backend_rejects``: a traced collective gloo raises on refuses the train file): exit 3
    at line 51 (60 s)."""
    out = _prove("r37a_04_dp_band_float_flag_caught_skip_allreduce_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "r37a_04_dp_band_float_flag_caught_skip_allreduce_wrong.py:51: " \
        "gloo raises for ReduceOp.BAND on a float32 tensor" in out["_err"], out


@pytest.mark.slow
def test_r37a_3_import_time_subprocess_tcpstore_is_not_accepted(tmp_path):
    """EQUIVALENT at faf97b6 (4 goals, 204 s); truth w1 0.0070, w2 0.0093.
    Fixed (R37a-3, ``fake_answers.importing`` counts the children too): exit 3."""
    out = _prove("r37a_05_dp_import_time_subprocess_tcpstore_count_lr.py", tmp_path)
    assert out["_rc"] == 3 and "a process ran when the train file was imported" in out["_err"], out


# -- sound or right outcomes worth keeping --------------------------------------------------------

@pytest.mark.slow
def test_r37a_5_megatron_create_group_is_equivalent(tmp_path):
    """exit 3 at faf97b6 (37 s, line 50: "the fake process group's store holds nothing (set)");
    truth 5.6e-17. (r35c_05, asserted EQUIVALENT in ``test_round35c.py``, exit 3 the same way,
    22 s.)
    Fixed (R37a-5, 41be4f1: the capture's own patches are torch's): EQUIVALENT (113 s)."""
    out = _prove("r37a_06_dp_megatron_create_group_desc_timeout_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r37a_4_torchtitan_nccl_env_is_equivalent(tmp_path):
    """exit 3 at faf97b6 (48 s, "dist.new_group with the environment its backend reads changed
    since the launch (TORCH_NCCL_ASYNC_ERROR_HANDLING, ...)"); truth 5.6e-17.
    Fixed (R37a-4: TORCH_NCCL_* not compared): EQUIVALENT (75 s)."""
    out = _prove("r37a_07_dp_torchtitan_nccl_env_in_parallelize_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r37a_9_own_device_mesh_bad_ifname_is_not_accepted(tmp_path):
    """EQUIVALENT at faf97b6 (4 goals, 78 s); truth w1 0.0088, w2 0.018.
    Fixed (R37a-9, ``group_construction.watch_device_mesh``): exit 3."""
    out = _prove("r37a_10_dp_own_device_mesh_bad_ifname_caught_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "a DeviceMesh's" in out["_err"] \
        and "GLOO_SOCKET_IFNAME" in out["_err"], out


# -- latent false accepts behind R37a-5 (R37a-6..8): fixed, refused by their own checks -----------

@pytest.mark.slow
def test_r37a_timedelta_max_timeout_caught_is_not_accepted(tmp_path):
    """``new_group(..., backend="gloo", timeout=timedelta.max)`` caught; truth w1 0.0088, w2
    0.018. exit 3 at faf97b6 (53 s) only because the capture made a real gloo group (R37a-5);
    ``_raises_in_real_run`` refuses only a negative timeout (R37a-6, latent: EQUIVALENT, 62 s,
    with R37a-5 worked around in a scratch copy).
    Fixed (R37a-6, ``group_construction``): refused by its own check, exit 3."""
    out = _prove("r37a_01_dp_gloo_timedelta_max_timeout_caught_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "with a timeout of" in out["_err"], out


@pytest.mark.slow
def test_r37a_bad_ifname_at_import_is_not_accepted(tmp_path):
    """``GLOO_SOCKET_IFNAME`` set at import, gloo ``new_group`` caught; truth w1 0.0088. exit 3 at
    faf97b6 (54 s) only by R37a-5; the environment baseline is taken after the import (R37a-7,
    latent: EQUIVALENT, 70 s, with R37a-5 worked around in a scratch copy).
    Fixed (R37a-7, ``group_construction``): refused by its own check, exit 3."""
    out = _prove("r37a_08_dp_gloo_bad_ifname_at_import_caught_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "GLOO_SOCKET_IFNAME" in out["_err"], out


@pytest.mark.slow
def test_r37a_bad_ifname_putenv_is_not_accepted(tmp_path):
    """``os.putenv("GLOO_SOCKET_IFNAME", ...)`` around a caught gloo ``new_group``; truth w1
    0.0088. exit 3 at faf97b6 (31 s) only by R37a-5; ``_backend_env`` reads ``os.environ``
    (R37a-8, latent: EQUIVALENT, 58 s, with R37a-5 worked around in a scratch copy).
    Fixed (R37a-8, ``group_construction``): refused by its own check, exit 3."""
    out = _prove("r37a_09_dp_gloo_bad_ifname_putenv_caught_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "GLOO_SOCKET_IFNAME" in out["_err"], out


@pytest.mark.slow
def test_r37a_premul_sum_caught_is_not_accepted(tmp_path):
    """``all_reduce(g, op=_make_nccl_premul_sum(1 / ws))`` with a no-divide fallback (gloo raises
    on PREMUL_SUM); truth w1 0.0070, w2 0.0093. UNKNOWN at faf97b6 (62 s): PREMUL_SUM has no
    lowering rule. A rule for it alone would make this R37a-2. Since R37a-2's fix
    (``backend_rejects``): exit 3 at line 51, "gloo has no ReduceOp PREMUL_SUM" (59 s)."""
    out = _prove("r37a_11_dp_premul_sum_caught_sum_without_divide_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "gloo has no ReduceOp PREMUL_SUM" in out["_err"], out
