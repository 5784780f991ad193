"""Round 43e: break the stop-43 fixes (``fsdp_hold``: the root at the first forward, stale held
views refused; ``pp_leaves``: ``requires_grad`` changes and ``c10d`` writes refused), against
merge/ppleaf43 at 8a4a979 (``tests/adversarial/ATTEMPTS.md``, "Round 43e"). Plans in
``plans/round43e/``. Truth: ``tests/adversarial/torch4_truth.py FILE 2`` (dp 2, gloo, float64,
two steps; ``--read-last`` where a state_dict read between steps would reshard FSDP2).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND43E = Path(__file__).resolve().parent / "plans" / "round43e"

pytestmark = pytest.mark.slow


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND43E / name, tmp_path)


def test_r43e_1_nograd_eval_then_data_update_then_second_update_is_not_accepted(tmp_path):
    """R43e-1: EQUIVALENT at 8a4a979 (2 goals, 24 s); truth step 1 w1 2.1e-4, w2 2.5e-4 (wrong):
    r43d_02 with a hand-written SGD through ``p.data.add_``. Since stop 43 (writes counted
    by storage, ``storage_writes``): exit 3 (9 s)."""
    out = _prove("r43e_01_fsdp_root_nograd_eval_then_data_update_wrong.py", tmp_path)
    assert not _equivalent(out), out


def test_r43e_1_nograd_eval_data_update_next_step_stale_is_not_accepted(tmp_path):
    """R43e-1 (across steps): EQUIVALENT at 8a4a979 (2 goals, 25 s); truth (``--read-last``) step
    2 w1 7.8e-5, w2 1.4e-4 (wrong): r43d_04 with the update through ``.data``. Since stop
    43: exit 3 (12 s)."""
    out = _prove("r43e_02_fsdp_root_nograd_eval_data_update_next_step_stale_wrong.py", tmp_path)
    assert not _equivalent(out), out


def test_r43e_1_no_reshard_settings_data_update_is_not_accepted(tmp_path):
    """R43e-1 (across steps): EQUIVALENT at 8a4a979 (2 goals, 24 s); truth (``--read-last``) step
    2 w1 1.8e-4, w2 1.7e-4 (wrong): r43d_05 with the update through ``.data``. Since stop
    43: exit 3 (13 s)."""
    out = _prove("r43e_03_fsdp_no_reshard_settings_data_update_next_step_stale_wrong.py",
                 tmp_path)
    assert not _equivalent(out), out


def test_r43e_4_nograd_eval_then_c10d_update_is_not_accepted(tmp_path):
    """R43e-1's family with the update written by ``dist.reduce_scatter_tensor``: UNKNOWN at
    8a4a979 (rc 2, 26 s; no lowering rule for ``c10d._reduce_scatter_base_``); truth step 1
    w1 2.1e-4, w2 2.5e-4 (wrong). Sound only by the missing rule."""
    out = _prove("r43e_04_fsdp_root_nograd_eval_then_c10d_update_wrong.py", tmp_path)
    assert not _equivalent(out), out


def test_r43e_2_submodule_probe_before_the_root_forward_is_not_accepted(tmp_path):
    """R43e-2: EQUIVALENT at 8a4a979 (4 goals, 25 s); every rank raises in FSDP2's ``_lazy_init``
    ("already been lazily initialized for w1") at ``model(x)``. Since stop 43 (a unit
    owning no parameter takes part in the root decision; FSDP2's lazy-init error): exit 3
    (16 s)."""
    out = _prove("r43e_05_fsdp_submodule_probe_before_root_forward_raises.py", tmp_path)
    assert not _equivalent(out), out


def test_r43e_parallelize_dry_run_then_scaled_init_is_refused(tmp_path):
    """R39c-1's family: EQUIVALENT at 8a4a979 (4 goals, 26 s); truth step 1 w1 0.0070, w2
    0.159 (wrong). Since stop 44 (``parallelize_guard``: no forward in ``parallelize``): exit 3
    (7 s)."""
    out = _prove("r43e_06_fsdp_parallelize_forward_then_scaled_init_wrong.py", tmp_path)
    assert out["_rc"] == 3, out


def test_r43e_3_parallelize_dry_run_then_decay_in_the_step_is_refused(tmp_path):
    """R43e-3: EQUIVALENT at 8a4a979 (4 goals, 25 s); truth step 1 w1 9.5e-3 (wrong): the
    step's decay writes the root's held unsharded ``w1`` for real, the stored one in the
    stand-in and the spec. Since stop 44 (``parallelize_guard.no_forward``): exit 3 (6 s)."""
    out = _prove("r43e_07_fsdp_parallelize_dry_run_then_decay_in_step_wrong.py", tmp_path)
    assert out["_rc"] == 3, out


def test_r43e_4_root_checkpoint_data_write_before_backward_is_not_accepted(tmp_path):
    """R43e-4: EQUIVALENT at 8a4a979 (4 goals, 25 s); truth step 1 w1 3.9e-3, w2 5.6e-3 (wrong;
    with ``reshard_after_forward=True`` 1.7e-18): FSDP2's recomputation runs on the root's
    held unsharded parameters, the stand-in's on the halved stored ones. Since stop 43:
    exit 3 (14 s, ``gathered_then_written`` with the storage counts)."""
    out = _prove("r43e_08_fsdp_root_checkpoint_data_write_before_backward_wrong.py", tmp_path)
    assert not _equivalent(out), out


def test_r43e_4_control_root_checkpoint_inplace_write_is_refused(tmp_path):
    """R43e-4's control: the same write in place (a version bump): exit 3 at 8a4a979 (9 s,
    ``gathered_then_written``); truth wrong (3.9e-3)."""
    out = _prove("r43e_09_fsdp_root_checkpoint_inplace_write_before_backward_wrong.py",
                 tmp_path)
    assert out["_rc"] == 3, out


def test_r43e_reshard_after_the_nograd_eval_proves(tmp_path):
    """r43d_02 with ``model.reshard()`` after the log (the R43d-2 refusal's advice): EQUIVALENT
    at 8a4a979 (4 goals, 24 s); truth right (5.6e-17)."""
    out = _prove("r43e_10_fsdp_root_nograd_eval_reshard_then_second_update_right.py", tmp_path)
    assert _equivalent(out), out
