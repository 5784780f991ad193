"""Round 44b: break stop 44's newest changes (``fsdp_hold`` per-root contexts, the parallelize
guard), ``tests/adversarial/ATTEMPTS.md``, "Round 44b". Plans in ``plans/round44b/``. Truth:
``tests/adversarial/torch4_truth.py FILE 2`` (dp 2, gloo, float64, two steps).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND44B = Path(__file__).resolve().parent / "plans" / "round44b"

pytestmark = pytest.mark.slow


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND44B / name, tmp_path)


# -- R44b-1: the root's views released at GatherShard's backward, not at the final callback --

# R44b-1: x needs no gradient, so FSDP2's root registers no RegisterPostBackwardFunction and
# reshards only in the final callback; the stand-in released the root's views at GatherShard's
# backward, so a late backward hook saw the stored parameter. Since stop 44
# (``fsdp_backward``: FSDP2's pre-backward and post-backward hooks): NOT EQUIVALENT (37-39 s).


def test_r44b_1_root_identity_read_in_late_backward_hook_is_refuted(tmp_path):
    """A tensor hook with the lowest sequence number reads ``model.w2.weight is p`` (root's
    parameter) and scales the gradients by 2 when it is not. Truth wrong (w1 0.0070, w2
    0.0093); EQUIVALENT at ac24550 (4 goals, 32 s)."""
    out = _prove("r44b_01_root_released_in_backward_identity_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r44b_1_root_write_in_late_backward_hook_is_refused(tmp_path):
    """The same hook halves ``model.w2.weight`` under no_grad: for real it lands on the root's
    unsharded parameter and is lost at the reshard. Truth wrong (w2 0.16 / 0.24); EQUIVALENT
    at ac24550 (4 goals, 31 s)."""
    out = _prove("r44b_14_root_released_in_backward_write_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r44b_1_replicate_root_identity_read_in_late_backward_hook_is_refuted(tmp_path):
    """R44b-1 with ``replicate`` (FSDP-based) for root and ``w1``. Truth wrong (w2 0.0093);
    EQUIVALENT at ac24550 (4 goals, 34 s)."""
    out = _prove("r44b_11_replicate_root_released_in_backward_identity_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r44b_1_first_layer_unit_write_in_late_backward_hook_is_refused(tmp_path):
    """``fully_shard(model.w1)``, w1 the first layer; the late hook halves ``w1.weight``. Truth
    wrong (w1 0.20 / 0.31); EQUIVALENT at ac24550 (4 goals, 32 s)."""
    out = _prove("r44b_16_first_layer_unit_released_in_backward_write_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r44b_5_root_isinstance_read_in_late_backward_hook_is_equivalent(tmp_path):
    """``isinstance(model.w2.weight, DTensor)`` in the late hook: real and spec say no (truth
    right 2.8e-17); the stand-in said yes: NOT EQUIVALENT at ac24550 (39 s); since stop 44:
    EQUIVALENT (38 s)."""
    out = _prove("r44b_12_root_released_in_backward_isinstance_right.py", tmp_path)
    assert out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT", out


# -- R44b-2: FSDPModule.unshard() in parallelize --


def test_r44b_2_unshard_in_parallelize_is_refused(tmp_path):
    """Truth wrong (w1 0.0070, w2 0.0093: no update in step 1); EQUIVALENT at ac24550 (12 s).
    Since stop 44 (``unshard()`` outside ``train_step`` refused): exit 3 (10 s)."""
    out = _prove("r44b_05_parallelize_unshard_only_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "unshard() outside train_step" in out["_err"], out


def test_r44b_2_unshard_then_build_optimizer_write_is_refused(tmp_path):
    """Truth wrong (w1 0.20, w2 0.16); EQUIVALENT at ac24550 (21 s). Since stop 44: exit 3."""
    out = _prove("r44b_04_parallelize_unshard_then_optimizer_write_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "unshard() outside train_step" in out["_err"], out


# -- R44b-3 / R44b-4: Python attributes of parameters read by build_optimizer --

def test_r44b_3_param_mark_set_in_parallelize_is_refuted(tmp_path):
    """``model.w1.weight.no_decay = True`` after fully_shard; build_optimizer groups by it.
    Truth wrong (w1 0.020); EQUIVALENT at ac24550 (10 goals, 28 s). Since stop 44 (the marks
    carried, ``param_attrs.carried``): NOT EQUIVALENT (40 s)."""
    out = _prove("r44b_09_parallelize_param_attr_read_by_build_optimizer_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r44b_4_param_mark_set_in_build_model_is_refused(tmp_path):
    """Truth wrong (w1 0.020); EQUIVALENT at ac24550 (10 goals, 38 s). Since stop 44 (a mark
    from before ``fully_shard`` refused, ``param_attrs.carried``): exit 3 (10 s)."""
    out = _prove("r44b_10_build_model_param_attr_read_by_build_optimizer_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "R44b-4" in out["_err"], out


# -- sound outcomes --


@pytest.mark.parametrize("name", [
    "r44b_02_parallelize_plain_tensor_attr_write_wrong.py",
    "r44b_03_parallelize_parametrization_wrong.py",
    "r44b_08_parallelize_no_gradient_sync_wrong.py",
])
def test_r44b_wrong_plans_refused(name, tmp_path):
    """Wrong plans (or not run by the truth: r44b_03) refused with exit 3 at ac24550."""
    assert _prove(name, tmp_path)["_rc"] == 3


def test_r44b_nonroot_pre_backward_write_is_refuted(tmp_path):
    """r44b_15: a write to a non-root unit's parameter inside its backward: exit 3 at ac24550
    (9 s, written between the gather and the backward). Since stop 44 (FSDP2's pre-backward
    registers the unit's views again, ``fsdp_backward``) the write lands on the view, as for
    real, and the plan is refuted: NOT EQUIVALENT. Truth wrong (0.16 / 0.23)."""
    out = _prove("r44b_15_nonroot_pre_backward_unshard_write_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r44b_divide_factor_in_parallelize_is_refuted(tmp_path):
    """``set_gradient_divide_factor(1.0)``: truth wrong 0.0093; NOT EQUIVALENT (26 s)."""
    out = _prove("r44b_07_parallelize_gradient_divide_factor_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


@pytest.mark.parametrize("name", [
    "r44b_06_build_optimizer_write_control_right.py",
    "r44b_13_parallelize_not_last_backward_right.py",
])
def test_r44b_right_plans_equivalent(name, tmp_path):
    """Right plans (truth <= 2.8e-17): EQUIVALENT at ac24550."""
    out = _prove(name, tmp_path)
    assert out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT", out
