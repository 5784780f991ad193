"""Round 42c (adversarial review of 622d0cf, ``grad_snapshot.logs_only``: a clip with an
infinite ``max_norm`` is no read point of the gradient goals), ``tests/adversarial/ATTEMPTS.md``
"Round 42c". Plans in ``plans/round42c/``. Truth: ``tests/adversarial/torch4_truth.py FILE 2``
(dp 2, gloo, float64, two steps).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND42C = Path(__file__).resolve().parent / "plans" / "round42c"

pytestmark = pytest.mark.slow


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND42C / name, tmp_path)


@pytest.mark.xfail(strict=True, reason="R42c-1 (open): logs_only knows Python numbers only; a "
                   "0-d tensor inf max_norm logging the local norm before a hand-written dp "
                   "reduction is still the read point: a right step refuted")
def test_r42c_1_tensor_inf_norm_logged_before_the_reduction_is_not_refuted(tmp_path):
    """NOT EQUIVALENT at 959c97b (53 s, grad:w2.weight, grad:w1.weight); truth right
    (5.6e-17)."""
    out = _prove("r42c_01_tensor_inf_logged_before_reduction_right.py", tmp_path)
    assert out.get("verdict") != "NOT EQUIVALENT", out


def test_r42c_1_numpy_float32_inf_norm_logged_before_the_reduction_is_not_refuted(tmp_path):
    """NOT EQUIVALENT at 959c97b (55 s, grad:w2.weight, grad:w1.weight); truth right
    (5.6e-17). Fixed (``logs_only`` takes numpy's reals): UNKNOWN (the inf constant has no
    lowering, as r42_05)."""
    out = _prove("r42c_02_numpy_float32_inf_logged_before_reduction_right.py", tmp_path)
    assert out["_rc"] == 2 and out.get("verdict") == "UNKNOWN", out


@pytest.mark.parametrize("name", [
    "r42c_03_inf_logged_error_if_nonfinite_before_reduction_right.py",
    "r42c_05_inf_logged_foreach_before_reduction_right.py"])
def test_inf_clip_with_error_if_nonfinite_or_foreach_is_refused(name, tmp_path):
    """r42c_03: refused (12 s, the norm check reads a tensor value); r42c_05: refused (14 s,
    foreach on meta tensors). Truth right (5.6e-17): false refusals, older than 622d0cf."""
    out = _prove(name, tmp_path)
    assert out["_rc"] == 3, out


def test_an_inf_logging_call_then_a_real_clip_leaves_every_goal_open(tmp_path):
    """r42c_04 (inf logging, a real clip after the reduction; truth right 1.4e-17): UNKNOWN
    (49 s): every goal open, the non-finite constant has no lowering."""
    out = _prove("r42c_04_inf_logged_then_real_clip_after_reduction_right.py", tmp_path)
    assert out["_rc"] == 2 and out.get("verdict") == "UNKNOWN", out


def test_a_minus_inf_clip_is_a_read_point(tmp_path):
    """r42c_06 (-inf, which clips: NaN on both sides for real): UNKNOWN at 959c97b (81 s, R42c-2:
    taken for the logging idiom); since -inf stays a read point, NOT EQUIVALENT at
    ``grad:w2.weight`` (the plan hands its unreduced gradients to the clip, as a clip on local
    gradients; the parameters open: the -inf constant has no lowering). Never EQUIVALENT."""
    out = _prove("r42c_06_minus_inf_clip_before_reduction.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out
