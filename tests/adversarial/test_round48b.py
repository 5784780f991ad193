"""Round 48b: break stop 48's fixes of round 48a (``fsdp_unsharded``: one leaf per sharded
parameter for the step, refilled in place after a write, ``left_over`` at the end of the step;
``step_state``: an emptied hook dict is none), against 07fec92 (``tests/adversarial/ATTEMPTS.md``,
"Round 48b"). Plans in ``plans/round48b/``. Truth: ``tests/adversarial/torch4_truth.py FILE 2``.

R48b-1 (false accept, fixed in stop 48): ``left_over`` counted the leaf's post-accumulate-grad
hooks as ``len(_post_accumulate_grad_hooks) - 1`` when the stand-in hooked it; a step that
empties that dict (dropping the stand-in's own hook) and registers its own hook (r48b_04), or
that puts its own hook under the stand-in hook's key (r48b_05), or empties it and registers a
tensor hook (r48b_10: (0 - 1) + 1 = 0), leaves a hook the count does not see. FSDP2's one
unsharded parameter keeps it and doubles step 2's local gradient of w2.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND48B = Path(__file__).resolve().parent / "plans" / "round48b"

pytestmark = pytest.mark.slow


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(path: Path, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(path, tmp_path)


@pytest.mark.parametrize("name", [
    "r48b_04_cleared_post_acc_dict_then_hook_wrong.py",
    "r48b_05_replace_post_acc_dict_wrong.py",
    "r48b_10_cleared_post_acc_dict_tensor_hook_wrong.py",
])
def test_r48b_1_stand_in_hook_replaced(name, tmp_path):
    """R48b-1: truth wrong in step 2 (w2 0.0042); EQUIVALENT at 07fec92 (6 goals, 46-47 s).
    Since stop 48 (no stand-in hook on the leaf; ``left_over`` counts every hook): exit 3
    naming the line and w2.weight (14-16 s)."""
    out = _prove(ROUND48B / name, tmp_path)
    assert out["_rc"] == 3 and "a hook on FSDP2's unsharded parameter" in out["_err"] \
        and "w2.weight" in out["_err"], out


@pytest.mark.parametrize("name", [
    "r48b_02_write_between_forwards_raf_false_wrong.py",
    "r48b_03_write_root_param_between_forwards_wrong.py",
    "r48b_12_leaf_written_then_refill_wrong.py",
])
def test_r48b_write_between_forwards_kept_unsharded(name, tmp_path):
    """Sound: a .data write of the sharded parameter between two forwards of a unit FSDP2 keeps
    unsharded (reshard_after_forward=False: w1 0.20; the root's w0: 0.19), or after a write to
    the unsharded leaf itself (r48b_12: w1 0.20): NOT EQUIVALENT (45-49 s)."""
    out = _prove(ROUND48B / name, tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


@pytest.mark.parametrize("name", [
    "r48b_01_write_between_forwards_raf_true_right.py",
    "r48b_08_write_between_forwards_checkpoint_right.py",
])
def test_r48b_write_between_forwards_refill_right(name, tmp_path):
    """Right plans (truth 2.8e-17): forward, .data write of the resharded w1, forward (the
    stand-in's refill), one backward over both losses, also with w1 checkpointed: EQUIVALENT
    (47-48 s)."""
    out = _prove(ROUND48B / name, tmp_path)
    assert _equivalent(out), out


@pytest.mark.parametrize("name", [
    "r48b_06_leaf_class_changed_wrong.py",
    "r48b_07_leaf_data_replaced_wrong.py",
])
def test_r48b_leaf_changed_at_end_refused(name, tmp_path):
    """Sound: the leaf's ``__class__`` changed (r48b_06: truth w0 0.0058 step 2; exit 3, a torch
    internal assert while capturing) or its ``.data`` replaced (r48b_07: both real ranks die;
    exit 3, ``.data =`` is not traced) at the end of the step: 21-22 s."""
    out = _prove(ROUND48B / name, tmp_path)
    assert out["_rc"] == 3, out


def test_r48b_emptied_spec_dict_vs_kept_plan_hook_refused(tmp_path):
    """Sound: the serial step's w0 gets a post-accumulate-grad hook and removes it (an emptied
    dict, none since R48a-3), the plan keeps it (r48b_09: truth wrong, w0 0.0073 step 1):
    exit 3, a new hook left on w0.weight (17 s)."""
    out = _prove(ROUND48B / "r48b_09_emptied_dict_vs_kept_hook_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "hook" in out["_err"] and "w0.weight" in out["_err"], out


def test_r48b_reshard_after_backward_false_then_step_refused(tmp_path):
    """Sound: ``set_reshard_after_backward(False)`` on w1 (parallel only), an optimizer step
    between two forward/backward pairs (r48b_11: truth wrong, w2 1.6e-05 step 1): exit 3, the
    unit's kept unsharded parameters are stale (R43d-2, 14 s)."""
    out = _prove(ROUND48B / "r48b_11_reshard_after_backward_false_opt_step_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "R43d-2" in out["_err"], out
