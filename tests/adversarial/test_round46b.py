"""Round 46b: break stop 46's FSDP2 gradient timing (``fsdp_grads``: the sharded ``.grad`` set
at the group's post-backward, post-accumulate-grad hooks run there; ``fsdp_hold.Hold.arrived``
/ ``_final``: gradients after a group's post-backward), against 678163e
(``tests/adversarial/ATTEMPTS.md``, "Round 46b"). Plans in ``plans/round46b/``. Truth:
``tests/adversarial/torch4_truth.py FILE 2`` (dp 2, gloo, float64, two steps).

R46b-1: ``fsdp_grads.flush`` sets the reduced gradients and runs the post-accumulate-grad hooks
in the order the gradients ARRIVED in the backward (w2 before w1); FSDP2's ``foreach_reduce``
in the unit's parameter order (w1 before w2). A hook reading another parameter's ``.grad``
sees what one device sees in the stand-in but not for real.

R46b-2: a module full backward hook on a unit reads ``module.weight.grad``: for real the
unsharded parameter, a leaf whose ``AccumulateGrad`` ran before the hook node (set, as on one
device); in the stand-in the registered gathered view is not a leaf (``.grad`` None). A right
plan is NOT EQUIVALENT (also at 60fadce).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND46B = Path(__file__).resolve().parent / "plans" / "round46b"

pytestmark = pytest.mark.slow


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(path: Path, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(path, tmp_path)


def test_r46b_1_post_accumulate_hook_order_not_equivalent(tmp_path):
    """R46b-1: root unit (w1, w2); a hook on w1.weight doubles its gradient when w2.weight.grad
    is None. Truth wrong (w1 0.0070 step 1, 0.0087 step 2); EQUIVALENT at 678163e (40 s);
    NOT EQUIVALENT at 60fadce (15 s): a regression of stop 46, fixed in stop 46
    (``Hold.flush`` in the unit's parameter order, ``_final_order``): NOT EQUIVALENT (47 s)."""
    out = _prove(ROUND46B / "r46b_01_post_accumulate_hook_order_within_unit_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r46b_2_full_backward_hook_unsharded_grad_not_refuted(tmp_path):
    """R46b-2: full backward hook on unit w2 doubling grad_input when module.weight.grad is
    None. Truth right (2.8e-17); NOT EQUIVALENT at 678163e and at 60fadce (15 s): a false
    refutation of a right plan. Since stop 48 (a real leaf): UNKNOWN for the plan's own hook
    left registered only in the parallel step (43 s), not refuted."""
    out = _prove(ROUND46B / "r46b_09_full_backward_hook_reads_unsharded_grad_right.py", tmp_path)
    assert out["_rc"] != 1, out


@pytest.mark.parametrize("name", [
    "r46b_02_post_accumulate_hook_order_final_callback_units_right.py",
    "r46b_06_group_both_members_one_reentrant_checkpoint_right.py",
    "r46b_07_group_first_member_reentrant_checkpoint_right.py",
    "r46b_13_unit_twice_and_on_branch_right.py",
    "r46b_14_unit_twice_keeps_unsharded_right.py",
])
def test_r46b_right_plans_equivalent(name, tmp_path):
    """Right plans (truth <= 5.6e-17) that must stay EQUIVALENT (35-45 s): a hook reading
    another unit's gradient in the final callback; a group + root with both members under one
    reentrant checkpoint, or only the first member under one; an MLP-block unit applied twice
    (``blk(blk(h))``) and on a branch, resharding after the forward or not (r46b_13 / 14, the
    lead: a later call's post-backward runs before the earlier call's gradient, which its
    pre-backward hook collects: ``Hold.arrived`` must not refuse it; 43 / 45 s)."""
    out = _prove(ROUND46B / name, tmp_path)
    assert _equivalent(out), out


@pytest.mark.parametrize("name", [
    "r46b_08_unit_twice_reentrant_checkpoint_each_wrong.py",
    "r46b_10_unit_twice_first_call_reentrant_checkpoint_wrong.py",
])
def test_r46b_unit_twice_reentrant_refused(name, tmp_path):
    """One unit applied twice, a call under a reentrant checkpoint whose inner backward runs
    the unit's post-backward before the other call's gradient: truth wrong (w1 0.0013);
    exit 3 naming R45c-2 (10-15 s)."""
    out = _prove(ROUND46B / name, tmp_path)
    assert out["_rc"] == 3 and "R45c-2" in out["_err"], out


@pytest.mark.xfail(strict=True, reason="square weight applied to the batch and to an "
                   "activation: lower.py 'renaming hidden_2_k to hidden_2 collides' (also "
                   "at 60fadce)")
def test_r46b_unit_on_batch_and_activation_equivalent(tmp_path):
    """w1(x) and w1(h) with a square w1: truth right (5.6e-17); internal error UNKNOWN (33 s)."""
    out = _prove(ROUND46B / "r46b_04_unit_on_batch_then_on_activation_right.py", tmp_path)
    assert _equivalent(out), out


def test_r46b_backward_inputs_root_view_equivalent(tmp_path):
    """Root unit only, ``loss.backward(inputs=[model.w2.weight])`` after the forward (the
    unsharded parameter for real): truth right (1.4e-17); exit 3 (45 s) until stop 48,
    EQUIVALENT since (a real leaf)."""
    out = _prove(ROUND46B / "r46b_12_backward_inputs_root_unsharded_param_right.py", tmp_path)
    assert _equivalent(out), out


def test_r46b_tensor_hook_on_sharded_param_not_equivalent(tmp_path):
    """r46b_15 (the lead): ``p.register_hook`` on every sharded parameter in train_step; for
    real it never fires (FSDP2's sharded parameter is not in autograd's graph), on one device
    it does. Truth wrong (w1 0.0086, w2 0.0118). UNKNOWN at 26598fc, NOT EQUIVALENT since the
    gather takes a fresh leaf (``fsdp_grads.outside_graph``; 29 s)."""
    out = _prove(ROUND46B / "r46b_15_tensor_hook_on_sharded_param_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out
