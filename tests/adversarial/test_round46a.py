"""Round 46a: break stop 45's last two fixes (R45c-1's reference-count test on every holder
``stale_refs.refuse_held`` visits; the late-binding fix of ``fsdp_hold.unshard_only``), against
60fadce (``tests/adversarial/ATTEMPTS.md``, "Round 46a"). Plans in ``plans/round46a/``. Truth:
``tests/adversarial/torch4_truth.py FILE 2`` (dp 2, gloo, float64, two steps).

R46a-1: ``refuse_held`` puts everything a running frame holds into ``stop`` and ends a chain
there; the capture's ``_capture`` frame holds the batch ``make_batch`` returned, so a stale
parameter moved by ``make_batch`` into an attribute of its batch object (kept in ``math``) is
never traced up to ``math``'s globals, and the step-state fingerprint does not read the batch.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND46A = Path(__file__).resolve().parent / "plans" / "round46a"

pytestmark = pytest.mark.slow


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(path: Path, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(path, tmp_path)


def test_r46a_1_ref_in_batch_object_not_equivalent(tmp_path):
    """R46a-1: build_model leaves w2.weight in math.PENDING46, make_batch moves it into its
    batch (a dict subclass attribute) kept in math; truth wrong (w1 0.0245, w2 0.0237);
    EQUIVALENT at 60fadce (15 s). Since stop 46 the capture keeps a plain dict of the batch's
    tensors, not the user's object, so the search reaches math's globals: exit 3 (12 s)."""
    out = _prove(ROUND46A / "r46a_04_ref_moved_into_batch_object_kept_in_math_identity_wrong.py",
                 tmp_path)
    assert out["_rc"] == 3 and "globals of the module math" in out["_err"], out


@pytest.mark.parametrize("name", [
    "r46a_01_grad_slot_of_tensor_in_math_identity_wrong.py",
    "r46a_02_autograd_saved_tensor_in_math_identity_wrong.py",
])
def test_r46a_cpp_held_refused(name, tmp_path):
    """w2.weight held from C++ (another tensor's ``.grad``; an autograd node's saved tensor),
    that tensor kept in math: the tensor's reference count shows the holder, exit 3 naming a
    hidden holder (4-5 s). Truth: 01 wrong (w1 0.0245); 02 right 2.8e-17 (``_saved_self``
    is not the same object: a conservative refusal)."""
    out = _prove(ROUND46A / name, tmp_path)
    assert out["_rc"] == 3 and "a holder Python's collector does not see" in out["_err"], out


def test_r46a_slots_deque_model_attribute_refused(tmp_path):
    """A ``__slots__`` object holding a deque with w2.weight on the model: exit 3 ('<model>.box
    holds the parameter', 14 s); truth wrong (w1 0.0245)."""
    out = _prove(ROUND46A / "r46a_13_slots_object_deque_model_attribute_identity_wrong.py",
                 tmp_path)
    assert out["_rc"] == 3 and "box holds the parameter" in out["_err"], out


def test_r46a_detached_alias_value_read_not_equivalent(tmp_path):
    """``math.D46 = w2.weight.detach()`` read by value: truth wrong in step 2 (w1 2.2e-5);
    exit 3 (the capture's FakeTensor assertion, 5 s: sound, internal message)."""
    out = _prove(ROUND46A / "r46a_03_detached_alias_in_math_value_read_wrong.py", tmp_path)
    assert not _equivalent(out), out


@pytest.mark.parametrize("name", [
    "r46a_05_two_units_recomputed_after_post_backward_identity_wrong.py",
    "r46a_06_two_units_recomputed_other_order_identity_wrong.py",
    "r46a_07_nested_units_recomputed_after_post_backward_identity_wrong.py",
    "r46a_08_two_units_recomputed_after_post_backward_exact_state_wrong.py",
    "r46a_09_two_units_recomputed_other_order_exact_state_wrong.py",
    "r46a_10_nested_units_recomputed_after_post_backward_exact_state_wrong.py",
    "r46a_11_two_units_reentrant_recomputed_after_post_backward_exact_state_wrong.py",
])
def test_r46a_units_recomputed_after_post_backward_refuted(name, tmp_path):
    """Two units (or a unit inside a unit) recomputed by a checkpoint after their
    post-backward stay unsharded after the backward in torch 2.13; the optimizer holds w0
    only, whose gradient is scaled by which units stay registered. Truth wrong (w0
    0.0029-0.017); NOT EQUIVALENT (33-54 s)."""
    out = _prove(ROUND46A / name, tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r46a_units_recomputed_right_control_equivalent(tmp_path):
    """r46a_08's right control (w0 doubled only if exactly one unit stays registered): truth
    right 3.5e-18; EQUIVALENT (45 s)."""
    out = _prove(ROUND46A / "r46a_12_two_units_recomputed_after_post_backward_exact_state_right.py",
                 tmp_path)
    assert _equivalent(out), out
