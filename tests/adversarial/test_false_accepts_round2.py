"""Adversarial round 2: wrong plans that ``prove`` itself calls EQUIVALENT."""

from __future__ import annotations

from pathlib import Path

import pytest

from proofs.prover import prove
from spec_lang import load

PLANS = Path(__file__).resolve().parent / "plans"


def test_the_collision_plan_without_overflow_is_refuted():
    """The premise of R2-10: without the overflowing term the refuter sees the inputs differ."""
    report = prove(load(PLANS / "n01_kind_colon.py"), timeout_s=120)
    assert report.verdict == "NOT EQUIVALENT"
    assert report.counterexample is not None and report.counterexample.goal == "loss"


# fixed (was a strict xfail): finding R2-10, proofs/smt.py names an input in:[kind, name] JSON-quoted
def test_overflow_plus_input_collision_is_not_equivalent():
    report = prove(load(PLANS / "n03_kind_colon_overflow.py"), timeout_s=120)
    assert report.verdict != "EQUIVALENT"
