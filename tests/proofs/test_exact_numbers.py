"""Exact constants in certificates: the strict grammar (issue 10, family 5).

The checker parses constants with regular expressions into integers and builds sympy numbers
from them (``proofs/exact_numbers.py``); nothing of a certificate is evaluated. These tests pin
the grammar (canonical spellings only; no floats, nan, zoo, whitespace, underscores or huge
integers), the agreement of the producer's encoder with the checker's on random radical sums,
and, end to end, that a certificate whose constant is Python source is rejected as malformed
without running it.
"""

from __future__ import annotations

import copy
import json
import math
from fractions import Fraction

import pytest
import sympy
from hypothesis import given
from hypothesis import strategies as st

from proofs.certificate import certificate_of, write_certificate
from proofs.checker import check_certificate
from proofs.errors import MalformedCertificate
from proofs.exact_numbers import MAX_DIGITS, ExactError, decode_number, encode_number, parse_rational
from proofs.kernel import KernelMalformed, decode_attr
from proofs.prover import prove
from spec_lang.exact_numbers import certificate_form, certifiable
from spec_lang.term import Op, term
from terms import inp, mul, problem

# -- the grammar ---------------------------------------------------------------------------------
radical = st.builds(
    lambda c, fs: sympy.Rational(c.numerator, c.denominator) * sympy.Mul(
        *[sympy.Integer(b) ** sympy.Rational(a, d) for b, a, d in fs]),
    st.fractions(min_value=-50, max_value=50, max_denominator=40),
    st.lists(st.tuples(st.integers(2, 60), st.integers(1, 5), st.integers(2, 6)), max_size=3))
radical_sum = st.lists(radical, min_size=1, max_size=4).map(lambda xs: sympy.expand(sympy.Add(*xs)))


@given(radical_sum)
def test_producer_and_checker_encode_alike_and_round_trip(v):
    j = certificate_form(v)
    assert encode_number(v) == j
    back = decode_number(j)
    assert sympy.expand(back - v) == 0
    assert encode_number(back) == j
    assert ("q" in j) == bool(v.is_Rational)
    assert abs(float(back) - float(v)) <= 1e-9 * max(1.0, abs(float(v)))


@given(radical_sum, radical_sum)
def test_sums_and_products_stay_certifiable(a, b):
    assert certifiable(sympy.expand(a + b)) and certifiable(sympy.expand(a * b))


@given(st.fractions(min_value=Fraction(1, 50), max_value=100, max_denominator=50),
       st.integers(-3, 3), st.integers(1, 4))
def test_rational_powers_of_positive_rationals_are_certifiable(c, p, q):
    v = sympy.Rational(c.numerator, c.denominator) ** sympy.Rational(p, q)
    j = certificate_form(v)
    assert math.isclose(float(decode_number(j)), float(c) ** (p / q), rel_tol=1e-12)


def test_the_attention_scale_is_a_radical():
    assert certificate_form(1 / sympy.sqrt(128)) == {"alg": [["1/16", [["2", "1/2"]]]]}
    assert certificate_form(-sympy.sqrt(2) / 16) == {"alg": [["-1/16", [["2", "1/2"]]]]}
    assert certificate_form(1 + sympy.sqrt(2)) == {"alg": [["1/1", [["2", "1/2"]]],
                                                           ["1/1", []]]}
    assert parse_rational("-3/4") == Fraction(-3, 4) and parse_rational("0/1") == 0


@pytest.mark.parametrize("v", [sympy.E, sympy.pi + sympy.E, sympy.log(2), sympy.sqrt(1 + sympy.sqrt(2)),
                               1 / (1 + sympy.sqrt(2)), sympy.Float(0.5), sympy.I, sympy.nan,
                               sympy.zoo, sympy.oo, 0.5, "1/2", True])
def test_numbers_outside_the_class_have_no_form(v):
    with pytest.raises(ExactError):
        encode_number(v)
    assert not certifiable(v)


BAD_RATIONALS = ["1/2 ", " 1/2", "1 /2", "1_0/3", "+1/2", "1/-2", "-0/1", "0/2", "2/4", "01/2",
                 "1/02", "1e5/1", "1.5/1", "0.5", "1", "1/0", "nan/1", "inf/1", "zoo", "nan",
                 "1/2\n", "１/2", "9" * (MAX_DIGITS + 1) + "/1", "1/" + "9" * (MAX_DIGITS + 1), ""]


@pytest.mark.parametrize("s", BAD_RATIONALS, ids=lambda s: repr(s)[:20])
def test_rational_grammar_is_strict(s):
    with pytest.raises(ExactError):
        parse_rational(s)
    with pytest.raises(KernelMalformed):
        decode_attr({"q": s})


BAD_CONSTANTS = [
    {"sympy": "Mul(Rational(1, 16), Pow(Integer(2), Rational(1, 2)))"},  # the old srepr form
    {"alg": [["1/16", [["2", "1/2"]]]], "q": "1/2"},           # two keys
    {"alg": [["1/4", []]]},                                      # a rational in alg form
    {"alg": [["1/16", [["2", "1/2"], ["3", "1/2"]]]]},          # not sympy's (sqrt(6)/16)
    {"alg": [["2/1", [["2", "1/2"]]], ["1/1", [["2", "1/2"]]]]},  # like terms not merged
    {"alg": [["1/1", []], ["1/1", [["2", "1/2"]]]]},             # terms out of order
    {"alg": [["1/16", [["1", "1/2"]]]]},                         # base 1
    {"alg": [["1/16", [["4", "1/2"]]]]},                         # sqrt(4) = 2
    {"alg": [["1/16", [["2", "3/2"]]]]},                         # exponent above 1
    {"alg": [["1/16", [["2", "2/4"]]]]},                         # exponent not in lowest terms
    {"alg": [["1/16", [["2", "1/1234567"]]]]},                   # exponent too long
    {"alg": [["1/16", [["2", 0.5]]]]},                           # a float
    {"alg": [["1/16", [[2, "1/2"]]]]},                           # an int base
    {"alg": []},
    {"alg": [["1/16", [["2", "1/2"]]]] * 33},
    {"q": 0.5}, {"q": 1}, {"q": ["1/2"]}, {"alg": "sqrt(2)/16"},
]


@pytest.mark.parametrize("x", BAD_CONSTANTS, ids=lambda x: json.dumps(x)[:40])
def test_constant_grammar_rejects(x):
    with pytest.raises(KernelMalformed):
        decode_attr(x)


@pytest.mark.parametrize("x", [float("nan"), float("inf"), 0.5, 2**63, -(2**63) - 1,
                               {"float": 1}, {"q": "1/2", "extra": 0}])
def test_attribute_grammar_rejects(x):
    with pytest.raises(KernelMalformed):
        decode_attr(x)


# -- end to end: a certificate with an irrational constant, and forged ones ----------------------
def _scale_problem():
    """``x * (1/sqrt(128))`` (the spec's attention scale) against ``x * 128^(-1/2)``."""
    x = inp("x", "B", kind="data")
    spec = mul(x, term(Op.CONST, (), (1 / sympy.sqrt(128),), ()))
    plan = mul(x, term(Op.POW, (term(Op.CONST, (), (Fraction(128),), ()),), (Fraction(-1, 2),),
                       ()))
    return problem([("loss", "loss", spec, plan)], {"B": 4})


@pytest.fixture(scope="module")
def scale_cert():
    r = prove(_scale_problem())
    assert r.verdict == "EQUIVALENT"
    return certificate_of(r)


def _alg_nodes(cert):
    return [i for i, n in enumerate(cert["nodes"]) if n[0] == "CONST" and "alg" in n[2][0]]


def test_an_irrational_constant_certificate_checks(tmp_path, scale_cert):
    assert [scale_cert["nodes"][i][2][0] for i in _alg_nodes(scale_cert)] == \
        [{"alg": [["1/16", [["2", "1/2"]]]]}]
    p = tmp_path / "c.json"
    write_certificate(p, scale_cert)
    assert check_certificate(p, retrace=False).verdict == "EQUIVALENT"


SENTINEL_CODE = "__import__('pathlib').Path({path!r}).write_text('ran')"


@pytest.mark.parametrize("form", [
    lambda code: {"sympy": code},
    lambda code: {"sympy": f"Symbol({code})"},
    lambda code: {"q": code},
    lambda code: {"alg": [[code, []]]},
    lambda code: {"alg": [["1/16", [[code, "1/2"]]]]},
], ids=["sympify", "srepr", "q", "alg-coefficient", "alg-base"])
def test_a_constant_that_is_code_is_malformed_and_never_runs(tmp_path, scale_cert, capsys, form):
    from proofs.cli import check_main

    sentinel = tmp_path / "SENTINEL"
    c = copy.deepcopy(scale_cert)
    (i,) = _alg_nodes(c)
    c["nodes"][i][2][0] = form(SENTINEL_CODE.format(path=str(sentinel)))
    p = tmp_path / "forged.json"
    p.write_text(json.dumps(c))
    assert check_main([str(p), "--no-retrace"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("check-certificate: error: ") and err.count("\n") == 1, err
    assert not sentinel.exists()
    with pytest.raises(MalformedCertificate):
        check_certificate(p, retrace=False)
    assert not sentinel.exists()


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "0.5", "1e400"])
def test_non_exact_json_numbers_are_malformed(tmp_path, scale_cert, text):
    c = copy.deepcopy(scale_cert)
    c["binding"]["B"] = "__X__"
    p = tmp_path / "c.json"
    p.write_text(json.dumps(c).replace('"__X__"', text))
    with pytest.raises(MalformedCertificate):
        check_certificate(p, retrace=False)


def test_a_huge_numerator_is_malformed(tmp_path, scale_cert):
    c = copy.deepcopy(scale_cert)
    (i,) = _alg_nodes(c)
    c["nodes"][i][2][0] = {"q": "7" * 5000 + "/1"}
    p = tmp_path / "c.json"
    p.write_text(json.dumps(c))
    with pytest.raises(MalformedCertificate, match="rational|schema: at nodes/"):
        check_certificate(p, retrace=False)


def test_the_rewriting_does_not_fold_into_an_unstatable_constant():
    """``1/(1 + sqrt(2))`` has no certificate form: add-content and pow-const leave it."""
    from rewriting import normalise

    c = term(Op.CONST, (), (1 + sympy.sqrt(2),), ())
    x = inp("x", "B", kind="data")
    t = term(Op.POW, (c,), (Fraction(-1),), ())
    (nf,), _ = normalise([mul(x, t)], {"B": 4})
    for n in _walk(nf):
        if n.op is Op.CONST:
            assert certifiable(n.attrs[0]), n


def _walk(t):
    from spec_lang.term import walk

    return walk(t)


# no module of the checker calls an evaluator: tests/proofs/test_trusted_base.py


@pytest.mark.parametrize("v", [sympy.sqrt(2) / sympy.sqrt(sympy.pi), sympy.pi, 1 / sympy.pi,
                               sympy.Rational(1, 3) + sympy.sqrt(2 * sympy.pi)])
def test_pi_powers_have_one_canonical_form(v):
    """GELU's tanh form needs sqrt(2/pi) (GPT-2, issue 12): ``["pi", "A/D"]`` factors, A/D a
    nonzero rational, decoded to the same value; producer and checker forms agree."""
    e = encode_number(v)
    assert e == certificate_form(v)
    assert sympy.simplify(decode_number(e) - v) == 0


@pytest.mark.parametrize("alg", [[["1/1", [["pi", "0/1"]]]], [["1/1", [["pi", "2/4"]]]],
                                 [["1/1", [["pi", "1/2"], ["2", "1/2"]]]],
                                 [["1/1", [["pi", "+1/2"]]]], [["1/1", [["PI", "1/2"]]]]])
def test_pi_factors_outside_the_grammar_are_rejected(alg):
    with pytest.raises(ExactError):
        decode_number({"alg": alg})
