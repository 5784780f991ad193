"""Round 44a: break stop 44 (FSDP-based ``replicate`` as an FSDP2 state, ``fully_shard([a, b])``
as one ``fsdp_hold.Group``), ``tests/adversarial/ATTEMPTS.md``, "Round 44a". Plans in
``plans/round44a/``. Truth: ``tests/adversarial/torch4_truth.py FILE 2`` (dp 2, gloo, float64,
two steps; ``--read-last`` where a kept unsharded parameter reaches step 2).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND44A = Path(__file__).resolve().parent / "plans" / "round44a"

pytestmark = pytest.mark.slow


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND44A / name, tmp_path)


# -- false accepts found at 9d7244f, fixed at stop 44 (fsdp_hold.forward_pre / forward_post) --


def test_r44a_1_group_left_open_under_replicate_root_is_refuted(tmp_path):
    """Group ``[body[0], c]`` under ``fully_shard(body)``, ``replicate`` (FSDP-based) root;
    ``c`` runs after ``body`` and reopens the group, which no root completes for real: c's
    unsharded parameter stays registered and an identity read after ``model(x)`` differs.
    Truth wrong (step 1 head 0.011, c 0.0049); EQUIVALENT at 9d7244f (8 goals, 49 s); since
    6091527 (a root context per root, only its forward root completes its groups): NOT
    EQUIVALENT (38 s)."""
    out = _prove("r44a_14_replicate_root_group_completed_by_other_root_identity_wrong.py",
                 tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r44a_2_group_reopened_by_standalone_member_is_refuted(tmp_path):
    """Group ``[w1, w2]`` under ``fully_shard(model)``: ``model(x)``, ``model.w2(z)``,
    ``model(2x)``; the root's second post-forward is not the forward root, the group stays
    open, w2's unsharded parameter registered: an identity read differs (x2). Truth wrong
    (step 1 w1 0.034, w2 0.040); EQUIVALENT at 9d7244f (56 s). Control r44a_22 (k = 1):
    truth right 2.8e-17, EQUIVALENT (52 s). Since 6091527 (the group claims
    ``iter_forward_root``): NOT EQUIVALENT (27 s)."""
    out = _prove("r44a_21_group_standalone_member_claims_forward_root_identity_wrong.py",
                 tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


# -- sound outcomes -------------------------------------------------------------------------

WRONG = [  # plan, truth (max, step 1 / 2), verdict at 9d7244f
    "r44a_03_replicate_fsdp_nograd_eval_before_step_wrong.py",          # --read-last 1.8e-4; exit 3
    "r44a_05_replicate_fsdp_nograd_write_after_forward_wrong.py",       # 0.20 / 0.31; NOT EQ 69 s
    "r44a_08_replicate_fsdp_grad_isinstance_dtensor_wrong.py",          # 0.0093 / 0.012; NOT EQ
    "r44a_09_replicate_fsdp_no_reshard_after_backward_wrong.py",        # --read-last 1.7e-4; exit 3
    "r44a_11_replicate_fsdp_root_over_fully_shard_w1_identity_wrong.py",  # 0.0093; NOT EQ 65 s
    "r44a_15_replicate_root_group_completed_by_other_root_write_wrong.py",  # 0.20; exit 3
    "r44a_17_group_member_rerun_then_write_other_member_wrong.py",      # 0.20; NOT EQ 49 s
    "r44a_18_group_member_rerun_then_write_same_member_wrong.py",       # 6.0e-4; exit 3
    "r44a_20_group_member_standalone_after_root_write_wrong.py",        # 0.20; NOT EQ 53 s
    "r44a_19_group_no_reshard_after_forward_write_after_forward_wrong.py",  # 0.20; NOT EQ 42 s
]

RIGHT = [  # truth <= 2.8e-17 both steps, EQUIVALENT at 9d7244f
    "r44a_01_replicate_fsdp_two_forwards_one_backward_right.py",
    "r44a_02_replicate_fsdp_two_backwards_accumulate_right.py",
    "r44a_04_replicate_fsdp_nograd_eval_after_step_right.py",           # --read-last 0
    "r44a_06_replicate_fsdp_nograd_write_before_forward_right.py",
    "r44a_07_replicate_fsdp_identity_after_backward_right.py",
    "r44a_10_replicate_fsdp_clip_grad_norm_right.py",
    "r44a_12_fully_shard_root_over_replicate_fsdp_w1_right.py",
    "r44a_13_replicate_fsdp_root_over_fully_shard_w1_right.py",
    "r44a_16_replicate_root_group_plain_right.py",
    "r44a_22_group_standalone_member_claims_forward_root_control_right.py",
]


@pytest.mark.parametrize("name", WRONG)
def test_r44a_wrong_plan_is_not_accepted(name, tmp_path):
    """Truth wrong (> 1e-9); NOT EQUIVALENT or refused at 9d7244f (see WRONG)."""
    out = _prove(name, tmp_path)
    assert not _equivalent(out), out


@pytest.mark.parametrize("name", RIGHT)
def test_r44a_right_plan_is_accepted(name, tmp_path):
    """Truth right (<= 2.8e-17); EQUIVALENT at 9d7244f."""
    out = _prove(name, tmp_path)
    assert _equivalent(out), out
