"""Stop 44: the parallelize guard (``spec_lang/torch_frontend/parallelize_guard.py``; findings
R39c-1 and R43e-3, ``tests/adversarial/ATTEMPTS.md``, "Stop 44: parallelize guard"). Plans in
``plans/round44/``. Truth: ``tests/adversarial/torch4_truth.py FILE 2`` (dp 2, gloo, float64,
two steps).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND44 = Path(__file__).resolve().parent / "plans" / "round44"

pytestmark = pytest.mark.slow


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND44 / name, tmp_path)


def test_rewrap_over_the_same_memory_in_parallelize_proves(tmp_path):
    """A new ``nn.Parameter`` over the same memory (``a.weight.detach()``) is the value
    ``build_model`` made: EQUIVALENT (4 goals, 62 s); truth right (2.8e-17)."""
    out = _prove("r44_01_dp_parallelize_rewrap_same_memory_right.py", tmp_path)
    assert out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT", out


def test_data_scale_in_parallelize_is_refused(tmp_path):
    """R39c-1 through ``p.data.mul_`` (no version bump): EQUIVALENT at a9166a7 (49 s); truth
    step 1 a.weight 0.19, b.weight 0.20 (wrong). Since stop 44 (writes by storage): exit 3
    (18 s)."""
    out = _prove("r44_02_dp_parallelize_data_scale_wrong.py", tmp_path)
    assert out["_rc"] == 3, out


def test_dry_run_in_build_optimizer_is_refused(tmp_path):
    """R43e-3 with the dry run in ``build_optimizer``: exit 3 at a9166a7 by another check (50 s,
    "leaves the gradient of 'w1.weight' set"); truth step 1 w1 9.5e-3 (wrong). Since stop 44
    (``no_forward`` around the traced ``build_optimizer``): exit 3 (14 s)."""
    out = _prove("r44_03_fsdp_build_optimizer_dry_run_then_decay_wrong.py", tmp_path)
    assert out["_rc"] == 3, out
