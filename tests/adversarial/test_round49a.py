"""Round 49a: break stop 49's freed-memory model of FSDP2's unsharded parameter
(``fsdp_freed``: the stand-in leaf's fake storage resized to 0 at each reshard, allocated at
each unshard, reads of freed memory refused), against 8ad04cc (``tests/adversarial/ATTEMPTS.md``,
"Round 49a"). Plans in ``plans/round49a/``. Truth: ``tests/adversarial/torch4_truth.py FILE 2``.

No false accept found: every wrong plan whose branch asks the storage size at a reshard or
unshard point FSDP2 places differently from the default (``set_reshard_after_backward(False)``,
root ``reshard_after_forward=True``, ``unshard()`` by the user, a post-accumulate-grad hook, a
module full backward hook and pre-hook, ``set_reshard_after_forward`` inside the step, a group
with ``reshard_after_forward=False``, a user autograd callback queued before FSDP2's final
callback, activation checkpointing's recompute) is NOT EQUIVALENT; ``Tensor.data_ptr`` and
``UntypedStorage.data_ptr`` are refused (R35d-2). A right plan reading the unsharded parameter
in a module full backward hook, and one taking only the metadata (shape, numel, dtype, device)
of a kept, freed reference, are EQUIVALENT.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND49A = Path(__file__).resolve().parent / "plans" / "round49a"

pytestmark = pytest.mark.slow


def _prove(path: Path, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(path, tmp_path)


@pytest.mark.parametrize("name", [
    "r49a_02_reshard_after_backward_false_wrong.py",
    "r49a_03_root_reshard_after_forward_true_wrong.py",
    "r49a_05_user_unshard_after_backward_wrong.py",
    "r49a_06_post_acc_hook_size_wrong.py",
    "r49a_07_set_reshard_after_forward_false_in_step_wrong.py",
    "r49a_08_group_no_reshard_after_forward_wrong.py",
    "r49a_10_user_callback_before_final_callback_wrong.py",
    "r49a_11_module_backward_hook_size_wrong.py",
    "r49a_12_backward_pre_hook_before_unshard_wrong.py",
    "r49a_15_checkpoint_recompute_backward_hook_size_wrong.py",
])
def test_r49a_size_branch_refuted(name, tmp_path):
    """Round 49a: the storage size asked where FSDP2 frees or allocates at a non-default point;
    truth wrong (w0 0.0073 / w2 0.0026 in step 1, r49a_02 w0 0.0073); NOT EQUIVALENT at 8ad04cc
    (30-84 s on a loaded machine)."""
    out = _prove(ROUND49A / name, tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


@pytest.mark.parametrize("name", [
    "r49a_01_data_ptr_allocated_root_wrong.py",
    "r49a_13_storage_data_ptr_root_wrong.py",
    "r49a_14_freed_storage_data_ptr_w2_wrong.py",
])
def test_r49a_data_ptr_refused(name, tmp_path):
    """Round 49a: a branch on ``data_ptr() != 0`` (a fake tensor's or storage's answers 0;
    truth wrong, w0 0.0073): exit 3 at 8ad04cc (R35d-2, 9-20 s)."""
    out = _prove(ROUND49A / name, tmp_path)
    assert out["_rc"] == 3 and "data_ptr" in out["_err"], out


@pytest.mark.parametrize("name", [
    "r49a_04_module_backward_hook_reads_weight_right.py",
    "r49a_09_freed_ref_shape_only_right.py",
])
def test_r49a_right_reads_accepted(name, tmp_path):
    """Round 49a: r49a_04 (a full backward hook on w2 reads ``mod.weight``, allocated for
    real; truth right 1.4e-17) and r49a_09 (only the metadata of a freed kept reference scales
    the loss; truth right 1.1e-16): EQUIVALENT at 8ad04cc (47 s, 29 s)."""
    out = _prove(ROUND49A / name, tmp_path)
    assert out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT", out
