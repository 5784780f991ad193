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


# fixed (was a strict xfail): finding R2-6, spec_lang/evaluate.py gives +-inf beyond float64's range
@pytest.mark.parametrize("name, verdicts", [("k01_big_constant_equal", {"EQUIVALENT"}),
                                            ("k02_big_constant_wrong", {"NOT EQUIVALENT",
                                                                        "UNKNOWN"})])
def test_large_exact_constants_get_a_verdict(name, verdicts):
    report = prove(load(PLANS / f"{name}.py"), timeout_s=120)
    assert report.verdict in verdicts


# fixed (was a strict xfail): finding R2-8, the schema allows pi factors and 4000-digit rationals, as proofs/exact_numbers.py
def test_a_small_certificate_with_a_pi_constant_checks(tmp_path):
    from proofs.checker import check_certificate

    from tests.adversarial.forge import certificate

    plan = PLANS / "k09_gelu_tanh_small.py"
    cert = certificate(plan, tmp_path / "c.json")
    assert cert["verdict"] == "EQUIVALENT"
    assert '"pi"' in (tmp_path / "c.json").read_text()
    r = check_certificate(tmp_path / "c.json", plan_path=plan)
    assert r.verdict == "EQUIVALENT"


@pytest.mark.parametrize("value, ok", [
    ({"q": "1" * 4000 + "/3"}, True), ({"q": "1" * 4001 + "/3"}, False),
    ({"alg": [["1/1", [["2", "1/2"], ["pi", "-1/2"]]]]}, True),
    ({"alg": [["1/1", [["pi", "0/2"]]]]}, False), ({"alg": [["1/1", [["e", "1/2"]]]]}, False)])
def test_the_schema_and_the_grammar_agree_on_constants(value, ok):
    """R2-8's class: the published schema accepts exactly the constants
    proofs/exact_numbers.py reads (digits, pi factors)."""
    import json

    import jsonschema

    from proofs.exact_numbers import ExactError, decode_number
    root = Path(__file__).resolve().parents[2]
    schema = json.loads((root / "proofs" / "certificate.schema.json").read_text())
    attr = {"$defs": schema["$defs"], **schema["$defs"]["attr"]}
    schema_ok = jsonschema.Draft202012Validator(attr).is_valid(value)
    try:
        decode_number(value)
        grammar_ok = True
    except ExactError:
        grammar_ok = False
    assert (schema_ok, grammar_ok) == (ok, ok)
