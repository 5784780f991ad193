"""Round 43d: break the S42-1 fix (``fsdp_hold``: FSDP2 parameter registration outside the
forward), against merge/ppleaf43 at f7d58ae (``tests/adversarial/ATTEMPTS.md``, "Round 43d").
Plans in ``plans/round43d/``. Truth: ``tests/adversarial/torch4_truth.py FILE 2`` (dp 2, gloo,
float64, two steps).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND43D = Path(__file__).resolve().parent / "plans" / "round43d"

pytestmark = pytest.mark.slow


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND43D / name, tmp_path)


def test_r43d_1_replicate_fsdp_parameter_identity_after_the_forward_is_refuted(tmp_path):
    """R43d-1: EQUIVALENT at f7d58ae (4 goals, 51 s); truth step 1 w1 0.0070, w2 0.0093
    (wrong): ``replicate_with_fsdp.replicate`` never reshards after the forward (any unit), the
    stand-in registered the stored parameter back (only ``fully_shard`` units had a Hold).
    Since stop 44 (a Hold for every FSDP2 state, ``DPUnit.fsdp_state``): NOT EQUIVALENT (15 s)."""
    out = _prove("r43d_01_replicate_fsdp_param_identity_after_forward_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r43d_2_nograd_eval_then_a_second_update_is_not_accepted(tmp_path):
    """R43d-2: EQUIVALENT at f7d58ae (4 goals, 53 s); truth step 1 w1 2.1e-4, w2 2.5e-4 (wrong;
    without the no_grad forward 5.6e-17): the root's no_grad forward between the first
    backward and the first ``optimizer.step()`` leaves FSDP2's unsharded parameters
    registered; the second forward of the step runs on them (pre-update values). Since stop
    43: exit 3 (8 s), the held view of a stored parameter updated since its gather refused
    at its reuse."""
    out = _prove("r43d_02_fsdp_root_nograd_eval_then_second_update_wrong.py", tmp_path)
    assert not _equivalent(out), out


def test_r43d_3_first_forward_root_parameter_identity_is_not_accepted(tmp_path):
    """R43d-3: EQUIVALENT at f7d58ae (4 goals, 55 s); truth step 1 w1 0.0070, w2 0.0093 (wrong):
    ``model.w1`` called directly first is FSDP2's root (keeps its unsharded parameters
    after the forward); the stand-in's root is the outer ``fully_shard(model)``. Since stop
    43: NOT EQUIVALENT (12 s), the root is the first unit whose forward runs
    (``fsdp_hold._decide_root``)."""
    out = _prove("r43d_03_fsdp_first_forward_root_identity_wrong.py", tmp_path)
    assert not _equivalent(out), out


def test_r43d_4_nograd_eval_before_the_update_is_not_accepted(tmp_path):
    """R43d-4: EQUIVALENT at f7d58ae (4 goals, 51 s); truth wrong at step 2 (w1 7.8e-5, w2 1.4e-4)
    (``torch4_truth.py FILE 2 --read-last``: a state_dict read between steps reshards).
    Since stop 43: exit 3 (9 s), a step ending with views held over an updated stored
    parameter refused."""
    out = _prove("r43d_04_fsdp_root_nograd_eval_before_step_next_step_stale_wrong.py", tmp_path)
    assert not _equivalent(out), out


def test_r43d_5_no_reshard_after_backward_left_on_is_not_accepted(tmp_path):
    """r7_c2 copied: EQUIVALENT at f7d58ae (4 goals, 58 s); truth wrong at step 2 (w1 1.8e-4, w2
    1.7e-4; ``torch4_truth.py FILE 2 --read-last``). Since stop 43: exit 3 (9 s), as
    R43d-4."""
    out = _prove("r43d_05_fsdp_no_reshard_settings_next_step_stale_wrong.py", tmp_path)
    assert not _equivalent(out), out


def test_r43d_6_grouped_units_without_a_root_are_not_accepted(tmp_path):
    """R43d-6: EQUIVALENT at f7d58ae (4 goals, 43 s); every rank raises for real. Since stop 43 (a
    fully_shard group that becomes the root refused, as FSDP2 raises): exit 3 (5 s)."""
    out = _prove("r43d_06_fsdp_grouped_units_without_root_raises.py", tmp_path)
    assert not _equivalent(out), out


def test_a_grad_eval_forward_then_a_second_update_is_refused(tmp_path):
    """r43d_07 (R43d-2 with autograd on in the logged forward): truth wrong (2.1e-4); the held
    views are reused and the optimizer wrote their shards: exit 3 (14 s, sound)."""
    out = _prove("r43d_07_fsdp_root_grad_eval_then_second_update_wrong.py", tmp_path)
    assert out["_rc"] == 3, out


def test_replicate_fsdp_kind_after_the_forward_is_proved(tmp_path):
    """r43d_08: truth right (5.6e-17); EQUIVALENT (4 goals, 39 s)."""
    out = _prove("r43d_08_replicate_fsdp_kind_after_forward_right.py", tmp_path)
    assert _equivalent(out), out


def test_r43d_7_replicate_fsdp_kind_before_the_forward_is_refuted(tmp_path):
    """R43d-7: EQUIVALENT at f7d58ae (4 goals, 44 s); truth step 1 w1 0.0070 (wrong). Since
    stop 44 (FSDP-based ``replicate`` parameters stored as ``DTensor(Replicate)``,
    ``dp_storage.stored_spec``): NOT EQUIVALENT (13 s)."""
    out = _prove("r43d_09_replicate_fsdp_kind_before_forward_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_a_nograd_teacher_forward_then_training_is_proved(tmp_path):
    """r43d_10 (self-distillation under a holding root): truth right (2.8e-17); EQUIVALENT
    (4 goals, 24 s)."""
    out = _prove("r43d_10_fsdp_root_nograd_teacher_then_train_right.py", tmp_path)
    assert _equivalent(out), out


def test_r43d_5_the_settings_left_on_are_really_wrong_at_step_2():
    """The truth of R43d-5 (r7_c2, once a control): read once after step 2 (``--read-last``),
    every rank's parameters are off the single-device ones (w1 1.8e-4, w2 1.7e-4 measured)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from torch4_truth import run

    res = run(str(ROUND43D.parent / "torch7" / "r7_c2_fsdp_reshard_settings.py"), steps=2,
              read_last=True)
    assert max(res[1].values()) >= 1e-4, res
