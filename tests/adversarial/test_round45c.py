"""Round 45c: break stop 45's fixes after round 45b, against 8a8569f (``tests/adversarial/
ATTEMPTS.md``, "Round 45c"). Plans in ``plans/round45c/``. Truth:
``tests/adversarial/torch4_truth.py FILE 2`` (dp 2, gloo, float64, two steps).

R45c-1: ``stale_refs.refuse_held`` compares reference counts with visible referrers only for
the replaced tensors; a holder met higher up that has a visible referrer (itself, in a cycle:
``f.me = f``, ``lst.append(lst)``) is no dead end, so a chain whose only real root is a C
registry (signal handler table, atexit list) or an ndarray (no ``tp_traverse``) in a module's
globals is accepted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND45C = Path(__file__).resolve().parent / "plans" / "round45c"

pytestmark = pytest.mark.slow


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(path: Path, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(path, tmp_path)


@pytest.mark.parametrize("name", [
    "r45c_01_signal_handler_self_cycle_identity_wrong.py",
    "r45c_07_numpy_in_math_self_ref_list_identity_wrong.py",
])
def test_r45c_1_cycled_hidden_holder_not_equivalent(name, tmp_path):
    """R45c-1: w2.weight held by a signal handler's / atexit function's defaults (the function
    holds itself) or by a self-referencing list in an ndarray kept in math; truth wrong
    (w1 0.0245, w2 0.0237); EQUIVALENT at 8a8569f (78 s / 65 s). Since ``refuse_held``
    compares the reference count of every holder it meets: exit 3 (5-6 s)."""
    out = _prove(ROUND45C / name, tmp_path)
    assert out["_rc"] == 3 and "a holder Python's collector does not see" in out["_err"], out


@pytest.mark.parametrize("name", [
    "r45c_02_contextvar_self_ref_list_identity_wrong.py",
    "r45c_06_atexit_self_ref_list_identity_wrong.py",
])
def test_r45c_hidden_holder_refused(name, tmp_path):
    """A self-referencing list in a ContextVar / as atexit args: the HAMT node / the args
    tuple above it has no visible referrer: exit 3 naming a hidden holder (13-26 s); truth
    wrong (w1 0.0245)."""
    out = _prove(ROUND45C / name, tmp_path)
    assert out["_rc"] == 3 and "a holder Python's collector does not see" in out["_err"], out


def test_r45c_user_thread_refused(tmp_path):
    """A thread started in build_model still running (its frame holds the reference): exit 3
    by the thread check (R34b-2), 10 s; truth not measured (the harness plan read the
    thread's frame)."""
    out = _prove(ROUND45C / "r45c_04_user_thread_frame_self_ref_list_identity_wrong.py",
                 tmp_path)
    assert out["_rc"] == 3 and "still runs" in out["_err"], out


def test_r45c_class_attribute_refused(tmp_path):
    """``type(self).REF = self.w2.weight``: exit 3 ('class MLP holds the parameter', 12 s);
    truth wrong (w1 0.0245)."""
    out = _prove(ROUND45C / "r45c_05_class_attribute_identity_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "class MLP holds" in out["_err"], out


@pytest.mark.parametrize("name", [
    "r45c_03_numpy_object_array_self_ref_list_identity_wrong.py",
    "r45c_08_atexit_self_cycle_function_identity_wrong.py",
])
def test_r45c_not_equivalent(name, tmp_path):
    """A self-referencing list in an ndarray model attribute (UNKNOWN, 49 s); a self-cycled
    atexit function found by ``gc.get_objects()`` in the forward (UNKNOWN, 56 s; R45c-1's
    hole is not what stops it). Truth wrong (w1 0.0245)."""
    out = _prove(ROUND45C / name, tmp_path)
    assert not _equivalent(out), out


@pytest.mark.parametrize("name", [
    "r45c_10_group_nonreentrant_checkpoint_identity_after_backward_right.py",
    "r45c_11_group_both_members_nonreentrant_checkpoint_identity_right.py",
])
def test_r45c_group_nonreentrant_right(name, tmp_path):
    """``fully_shard([w1, w2])`` + root with a non-reentrant checkpoint (over w1, or over both
    members) and a late ``model.w1.weight is p1`` read: truth right (3.5e-18); EQUIVALENT
    (61 s / 65 s)."""
    out = _prove(ROUND45C / name, tmp_path)
    assert _equivalent(out), out


def test_r45c_2_group_post_backward_in_recomputation_reads_freed_memory(tmp_path):
    """R45c-2, r45c_12 (below): torch fails reading w1's unsharded parameter after the group's
    post-backward freed it (setStorage, storage of size 0). Exit 3 naming R45c-2 since stop
    46; since stop 49 (``fsdp_freed``) the read itself is refused first, at the line that
    reads it (47), naming w1.weight, the group's ``fully_shard`` line and R48a-2 (19 s)."""
    name = "r45c_12_group_later_member_reentrant_checkpoint_torch_crashes.py"
    out = _prove(ROUND45C / name, tmp_path)
    assert out["_rc"] == 3, out
    assert "R48a-2" in out["_err"] and "w1.weight" in out["_err"], out["_err"]
    assert f"{name}:47:" in out["_err"] and f"{name}:39)" in out["_err"], out["_err"]


@pytest.mark.parametrize("name", [
    "r45c_13_group_later_member_reentrant_checkpoint_first_member_grad_late_wrong.py",
])
def test_r45c_2_group_post_backward_in_recomputation(name, tmp_path):
    """R45c-2: ``fully_shard([w1, w2])`` + root, w2 (the later member) under a reentrant
    checkpoint: its recomputation's inner backward runs the group's post-backward before w1's
    backward. r45c_12: torch fails (setStorage, storage of size 0); EQUIVALENT 43 s.
    r45c_13 (w1 reads the batch): torch silently drops w1's gradient, truth wrong w1 0.0152;
    EQUIVALENT 52 s. Since stop 46 (``fsdp_hold.Hold.arrived``): exit 3 naming the group's
    ``fully_shard`` line and w1's weight (9 s)."""
    out = _prove(ROUND45C / name, tmp_path)
    assert out["_rc"] == 3, out
    assert "R45c-2" in out["_err"] and "w1.weight" in out["_err"], out["_err"]
    assert f"{name}:39:" in out["_err"], out["_err"]     # the fully_shard([w1, w2]) line
