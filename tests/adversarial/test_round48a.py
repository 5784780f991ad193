"""Round 48a: break stop 48's FSDP2 unsharded leaf (``fsdp_unsharded``: a real leaf
``nn.Parameter`` per parameter per step, reused at later gathers while the sharded parameter is
unchanged, ``leaf_of``), against a4699b9 (``tests/adversarial/ATTEMPTS.md``, "Round 48a"). Plans
in ``plans/round48a/``. Truth: ``tests/adversarial/torch4_truth.py FILE 2``.

R48a-1 (fixed in stop 48): FSDP2 keeps ONE unsharded parameter object per parameter for the
whole run (``FSDPParam._unsharded_param``, ``init_unsharded_param`` returns early after the
first all-gather); the stand-in makes a new leaf per step and after the sharded parameter is
written (an optimizer step inside ``train_step``). What stays on the real object is lost: its
identity (r48a_01, r48a_06 under the FSDP-based ``replicate``), a post-accumulate-grad hook
registered in an earlier iteration (r48a_02) or left at the end of the step (r48a_05), a
``.grad`` left on it at the end of the step (r48a_04).
R48a-2 (fixed in stop 49, ``fsdp_freed``): FSDP2 frees the unsharded parameter's storage at the
reshard (``free_storage``: size 0); the stand-in's leaf kept its data (r48a_03; r48a_08 reads a
kept reference to the root's w0 after its reshard: both real ranks die with SIGSEGV,
EQUIVALENT).
R48a-3 (needless; fixed in stop 48): a right plan registering a post-accumulate-grad hook on
``mod.weight`` in a forward hook (handles removed) is UNKNOWN: the serial parameter gains a
``_post_accumulate_grad_hooks`` attribute the sharded one does not (r48a_07).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND48A = Path(__file__).resolve().parent / "plans" / "round48a"

pytestmark = pytest.mark.slow


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(path: Path, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(path, tmp_path)


@pytest.mark.parametrize("name", [
    "r48a_01_leaf_identity_across_opt_step_wrong.py",
    "r48a_02_post_acc_hook_persists_wrong.py",
    "r48a_06_replicate_leaf_identity_wrong.py",
])
def test_r48a_1_leaf_one_object_in_the_step(name, tmp_path):
    """R48a-1: truth wrong (w0 0.0062, w2 0.0035); EQUIVALENT at a4699b9 (42-48 s). Since
    5325191 (one leaf per sharded parameter for the step, gathered again in place after a
    write: ``fsdp_unsharded._refill``): NOT EQUIVALENT (47-49 s)."""
    out = _prove(ROUND48A / name, tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


@pytest.mark.parametrize("name, what", [
    ("r48a_04_grad_left_on_leaf_across_steps_wrong.py", "a .grad"),
    ("r48a_05_hook_left_on_leaf_across_steps_wrong.py", "a hook"),
])
def test_r48a_1_left_on_leaf_is_refused(name, what, tmp_path):
    """R48a-1: truth wrong in step 2 (r48a_04: w2 0.1; r48a_05: w2 0.0042); EQUIVALENT at
    a4699b9. Since 5325191 (``fsdp_unsharded.left_over`` at the end of the step): exit 3
    naming the unit's line and w2.weight (16 s)."""
    out = _prove(ROUND48A / name, tmp_path)
    assert out["_rc"] == 3 and what in out["_err"] and "w2.weight" in out["_err"] \
        and "R48a-1" in out["_err"], out


def test_r48a_2_storage_freed(tmp_path):
    """R48a-2: r48a_03 truth wrong (w0 0.0073 / 0.0064), EQUIVALENT at a4699b9 (44 s) and
    through stop 48. Since stop 49 (``fsdp_freed``: the leaf's fake storage resized to 0 at
    every reshard, so ``untyped_storage().size()`` answers 0 as for real): NOT EQUIVALENT
    (15 s)."""
    out = _prove(ROUND48A / "r48a_03_unsharded_storage_freed_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r48a_2_old_reference_after_opt_step(tmp_path):
    """R48a-2: r48a_08 (a kept reference to the root's unsharded w0 read after the reshard):
    both ranks die with SIGSEGV for real; EQUIVALENT at a4699b9 (45 s); NOT EQUIVALENT since
    stop 48's one leaf per step, gathered again in place (57 s); since stop 49 the read of
    freed memory is refused (exit 3 naming w0.weight and the read's line, 6 s)."""
    out = _prove(ROUND48A / "r48a_08_old_leaf_values_after_opt_step_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "R48a-2" in out["_err"] and "w0.weight" in out["_err"], out


def test_r48a_3_hook_on_leaf_right(tmp_path):
    """R48a-3: truth right (1.4e-17); UNKNOWN at a4699b9 (43 s). Since stop 48 (an emptied
    hook dict compared as none: ``step_state``): EQUIVALENT (31 s)."""
    out = _prove(ROUND48A / "r48a_07_post_acc_hook_doubling_right.py", tmp_path)
    assert _equivalent(out), out


def test_r48a_autograd_grad_on_leaf_right(tmp_path):
    """Right control (truth 1.4e-17): ``torch.autograd.grad`` naming w2's kept unsharded leaf
    (``reshard_after_forward=False``), then ``loss.backward()``: EQUIVALENT at a4699b9 (47 s)."""
    out = _prove(ROUND48A / "r48a_09_autograd_grad_on_leaf_right.py", tmp_path)
    assert _equivalent(out), out


def test_r48a_backward_inputs_leaf_not_accepted(tmp_path):
    """A second backward naming only the kept leaf (truth wrong: w2 0.0033): NOT EQUIVALENT at
    a4699b9 (49 s, plan = 2 x spec on w2)."""
    out = _prove(ROUND48A / "r48a_10_backward_inputs_kept_leaf_wrong.py", tmp_path)
    assert out["_rc"] == 1, out
