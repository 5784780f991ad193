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


@pytest.mark.xfail(strict=True, reason="R42c-1 (open): numpy.float32('inf') is no Python "
                   "float, so logs_only says no: the logging call is the read point, a right "
                   "step refuted")
def test_r42c_1_numpy_float32_inf_norm_logged_before_the_reduction_is_not_refuted(tmp_path):
    """NOT EQUIVALENT at 959c97b (55 s, grad:w2.weight, grad:w1.weight); truth right
    (5.6e-17)."""
    out = _prove("r42c_02_numpy_float32_inf_logged_before_reduction_right.py", tmp_path)
    assert out.get("verdict") != "NOT EQUIVALENT", out
