"""Round 47b (helper 47b): break the FSDP2 ``MixedPrecisionPolicy`` model (R47-1, 318f98b).
Plans in ``plans/round47b/``; truth: ``tests/adversarial/torch4_truth.py FILE 2`` (dp 2, float64
parameters, the policy's bf16 casts: a right plan differs by bf16 rounding, 2e-5..9e-5 here;
the wrong ones by 0.005..0.06), r47b_13 / r47b_17 (pipelining) by
``tests/torch_frontend/pp_truth.py FILE`` (control 3.9e-4, wrong 7.5e-3).

R47b-1: a ``fully_shard`` unit that owns no parameter of its own (``fsdp_hold.param_less_unit``,
e.g. the root over ``fully_shard(model.up)`` / ``fully_shard(model.down)``) appended its forward
hooks after the user's instead of taking FSDP2's places (``prepend=True`` pre-hook, post-hook at
the call): a user pre-hook registered after ``fully_shard`` saw the uncast input (r47b_14) and a
user forward hook saw the output before ``output_dtype`` (r47b_15): both EQUIVALENT at 318f98b,
truth wrong (0.049 / 0.059). Fixed in 567ca71 (``into_slots`` for those hooks too).

R47b-2 (needless, not mp-specific): a full backward hook on a ``fully_shard`` unit fails in the
capture ("a and b must have same reduction dim"): exit 3 on a right plan (r47b_18).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND47B = Path(__file__).resolve().parent / "plans" / "round47b"

pytestmark = pytest.mark.slow


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND47B / name, tmp_path)


@pytest.mark.parametrize("name", [
    "r47b_14_paramless_root_user_pre_hook_wrong.py",
    "r47b_15_paramless_root_user_post_hook_wrong.py",
])
def test_r47b_1_paramless_unit_hooks_in_fsdp_places(name, tmp_path):
    """R47b-1: EQUIVALENT at 318f98b (20-28 s), truth wrong (0.049 / 0.059 against bf16 noise
    8e-5); NOT EQUIVALENT since 567ca71 (40-42 s)."""
    out = _prove(name, tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


@pytest.mark.parametrize("name", [
    "r47b_02_user_fwd_hook_after_right.py",
    "r47b_04_user_pre_hook_prepend_right.py",
    "r47b_11_param_read_after_resharded_right.py",
    "r47b_16_paramless_root_pre_hook_prepend_right.py",
    "r47b_19_offload_policy_default_right.py",
    "r47b_21_autocast_mp_right.py",
])
def test_r47b_right_controls_equivalent(name, tmp_path):
    """Right plans (truth <= 9e-5, bf16 rounding): EQUIVALENT at 318f98b and 567ca71."""
    out = _prove(name, tmp_path)
    assert out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT", out


@pytest.mark.parametrize("name", [
    "r47b_01_user_fwd_hook_before_wrong.py",
    "r47b_03_user_pre_hook_after_wrong.py",
    "r47b_05_root_param_dtype_after_forward_wrong.py",
    "r47b_07_fsdp_replicate_mp_branch_wrong.py",
    "r47b_08_group_mp_branch_wrong.py",
    "r47b_09_tensor_hook_grad_dtype_wrong.py",
    "r47b_10_checkpoint_mp_branch_wrong.py",
    "r47b_12_param_read_after_no_reshard_wrong.py",
    "r47b_13_pp_fsdp_mp_stage_input_branch_wrong.py",
    "r47b_20_kwargs_input_branch_wrong.py",
])
def test_r47b_wrong_plans_not_equivalent(name, tmp_path):
    """Wrong plans (truth 0.005..0.06 against noise <= 9e-5; r47b_13 7.5e-3 against its
    control's 3.9e-4): NOT EQUIVALENT at 318f98b (14-59 s)."""
    out = _prove(name, tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r47b_2_full_backward_hook_on_unit_needless_refusal(tmp_path):
    """R47b-2 (needless, open): a right plan with a full backward hook on a fully_shard unit
    (truth 1.4e-17) is refused in the capture (exit 3, 9 s); recorded as measured."""
    out = _prove("r47b_18_full_bw_hook_no_mp_right.py", tmp_path)
    assert out["_rc"] == 3, out
