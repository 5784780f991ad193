"""Adversarial round: attempts that are correctly rejected, kept as cheap regressions.

Each plan is wrong at the real sizes (``ATTEMPTS.md`` gives the values) and ``prove`` must say
NOT EQUIVALENT, with the diverging goal named.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proofs.prover import prove
from spec_lang import load

PLANS = Path(__file__).resolve().parent / "plans"


@pytest.mark.parametrize("name, goal", [
    ("d03_where_guard_spec", "loss"),   # spec guards s/n with where(n > 0); the plan does not
    ("d04_topk_elig_count", "loss"),    # y / n * n with n = sum_E topk(eligible): 0 if none
    ("m06_hook_scale", "grad:w"),       # scale_grad(w, 1/2): gradient halved
    ("m10_ownership_gap", "w"),         # Ownership(dp, H, [0, 1, 1, None]): last rows never updated
])
def test_wrong_plan_is_refuted(name, goal):
    report = prove(load(PLANS / f"{name}.py"), timeout_s=60)
    assert report.verdict == "NOT EQUIVALENT"
    assert report.counterexample is not None
    assert report.counterexample.goal == goal
