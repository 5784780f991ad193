"""Adversarial round 2: exact constants near the grammar's limits (4000-digit rationals).

``k01``: the plan multiplies by ``a * c * b`` with ``a * b = 1`` exactly (3000-digit
numerators), the spec by ``c``: equal over the reals. ``k02``: the plan multiplies by ``a * c``,
the spec by ``c``: wrong by a factor ``a ~ 3.3e2998``. Constants of this size are in the DSL's
and the certificate's grammar, so ``prove`` must decide them (or say UNKNOWN with a reason),
never fail with an internal error.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proofs.prover import prove
from spec_lang import load

PLANS = Path(__file__).resolve().parent / "plans"


@pytest.mark.xfail(strict=True, raises=OverflowError, reason="finding R2-6: the refuter's "
                   "float64 evaluation converts every CONST with float() (spec_lang/evaluate.py "
                   "line 79); a 3000-digit rational overflows and prove ends with an internal "
                   "error (CLI: exit 2) instead of a verdict")
@pytest.mark.parametrize("name, verdicts", [("k01_big_constant_equal", {"EQUIVALENT"}),
                                            ("k02_big_constant_wrong", {"NOT EQUIVALENT",
                                                                        "UNKNOWN"})])
def test_large_exact_constants_get_a_verdict(name, verdicts):
    report = prove(load(PLANS / f"{name}.py"), timeout_s=120)
    assert report.verdict in verdicts


@pytest.mark.xfail(strict=True, reason="finding R2-8: docs/certificate.schema.json still allows "
                   "only integer radical bases (no [\"pi\", \"A/D\"]) and rationals of <= 400 "
                   "digits, while proofs/exact_numbers.py allows pi powers and 4000 digits; a "
                   "certificate under SCHEMA_FULL_LIMIT rows with sqrt(2/pi) (tanh GELU) is "
                   "malformed (exit 3) and prove's self-check disagrees")
def test_a_small_certificate_with_a_pi_constant_checks(tmp_path):
    from proofs.checker import check_certificate

    from tests.adversarial.forge import certificate

    plan = PLANS / "k09_gelu_tanh_small.py"
    cert = certificate(plan, tmp_path / "c.json")
    assert cert["verdict"] == "EQUIVALENT"
    assert '"pi"' in (tmp_path / "c.json").read_text()
    r = check_certificate(tmp_path / "c.json", plan_path=plan)
    assert r.verdict == "EQUIVALENT"
