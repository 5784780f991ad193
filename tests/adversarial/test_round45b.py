"""Round 45b: break stop 45's fixes after round 45a, against f8061a3 (``tests/adversarial/
ATTEMPTS.md``, "Round 45b"). Plans in ``plans/round45b/``. Truth:
``tests/adversarial/torch4_truth.py FILE 2`` (dp 2, gloo, float64, two steps).

R45b-1: references to a replaced parameter that ``stale_refs.refuse_held`` does not reach
(holders the collector does not see, or whose chain ends in interpreter / thread state).
R45b-2: a ``fully_shard([w1, w2])`` group: FSDP2's PRE_BACKWARD is the STATE's, the stand-in
sets it on the Hold of the member whose output got the gradient only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND45B = Path(__file__).resolve().parent / "plans" / "round45b"

pytestmark = pytest.mark.slow


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(path: Path, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(path, tmp_path)


@pytest.mark.parametrize("name", [
    "r45b_01_gc_freeze_hides_holder_identity_wrong.py",
    "r45b_02_contextvar_identity_wrong.py",
    "r45b_03_numpy_object_array_identity_wrong.py",
    "r45b_04_codecs_registry_identity_wrong.py",
    "r45b_05_signal_handler_defaults_identity_wrong.py",
])
def test_r45b_1_hidden_holder_refused(name, tmp_path):
    """R45b-1: a reference to build_model's w2.weight kept where the collector's upward
    search does not reach a module's globals; truth wrong (w1 0.0245, w2 0.0237);
    EQUIVALENT at f8061a3 (30-53 s). Since ``stale_refs`` counts references and refuses a
    holder nothing visible holds: exit 3 naming a hidden holder (12-14 s)."""
    out = _prove(ROUND45B / name, tmp_path)
    assert out["_rc"] == 3 and "a holder Python's collector does not see" in out["_err"], out


@pytest.mark.parametrize("name", [
    "r45b_07_threading_local_identity_wrong.py",
    "r45b_08_tensor_attr_of_other_tensor_identity_wrong.py",
])
def test_r45b_held_reference_refused(name, tmp_path):
    """A threading.local / another tensor's attribute (kept in math) holding w2.weight: exit 3
    naming 'the globals of the module math' (8-9 s); truth wrong (w1 0.0245)."""
    out = _prove(ROUND45B / name, tmp_path)
    assert out["_rc"] == 3 and "the globals of the module math" in out["_err"], out


def test_r45b_2_group_reentrant_identity_sound(tmp_path):
    """R45b-2 (wrong plan r45b_10: truth wrong w0 0.0087 / w1 0.0023 / w2 0.0033): the
    capture failed at f8061a3 (exit 3, 14 s, 'NoneType' object has no attribute 'mul_': a
    gradient the stand-in lost, R45b-3). Since the group's training state is one for its
    members (``Hold.mates``) and a member gathered under ``no_grad`` is gathered again with
    autograd: NOT EQUIVALENT (15 s)."""
    out = _prove(ROUND45B / "r45b_10_group_reentrant_checkpoint_member_after_sibling_pre_backward_wrong.py",
                 tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r45b_separate_units_reentrant_control_right(tmp_path):
    """r45b_11 (two states, truth right 2.8e-17): EQUIVALENT (42 s)."""
    out = _prove(ROUND45B / "r45b_11_separate_units_reentrant_checkpoint_control_right.py",
                 tmp_path)
    assert _equivalent(out), out


def test_r45b_3_group_reentrant_checkpoint_right(tmp_path):
    """R45b-3: needless refusal at f8061a3 (exit 3, 34 s: 'the parallel step does not produce
    [grad:w2.weight]'; the group's second member ran on views gathered under the reentrant
    checkpoint's no_grad); truth right 2.8e-17. Now EQUIVALENT (15 s)."""
    out = _prove(ROUND45B / "r45b_12_group_reentrant_checkpoint_plain_right.py", tmp_path)
    assert _equivalent(out), out


def test_r45b_4_group_nonreentrant_checkpoint_right(tmp_path):
    """R45b-4: needless UNKNOWN at f8061a3 (30 s, 'changes module w1._forward_hooks': the
    group's recomputation never completes, views left in the hooks' ``cur``); truth right
    2.8e-17. Since the hooks' per-step state is reset at the step's end
    (``fsdp_hold.STEP_RESETS``): EQUIVALENT (15 s)."""
    out = _prove(ROUND45B / "r45b_13_group_nonreentrant_checkpoint_plain_right.py", tmp_path)
    assert _equivalent(out), out


def test_r45b_5_torchtitan_blocks_checkpoint_right(tmp_path):
    """R45b-5: needless UNKNOWN of a plain AC + FSDP-per-block + root plan at f8061a3 and
    95d291d (39 s, 'changes module blocks.0._forward_hooks': non-reentrant checkpoint stops
    the recomputation inside the unit's forward, so its post-forward hook never ran); truth
    right 5.6e-17. Since ``fsdp_hold.STEP_RESETS``: EQUIVALENT (15 s)."""
    out = _prove(ROUND45B / "r45b_14_blocks_nonreentrant_checkpoint_fsdp_per_block_right.py",
                 tmp_path)
    assert _equivalent(out), out
