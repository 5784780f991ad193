"""Floats written with ``math`` read as the exact constant the user means, and only then
(``spec_lang/constants.py``, issue 12 item 3)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import sympy
from hypothesis import given
from hypothesis import strategies as st

from spec_lang import ops
from spec_lang.constants import collect_readings, exact_spelling, read_float
from spec_lang.errors import SpecError


@pytest.mark.parametrize("x, exact", [
    (math.sqrt(2 / math.pi), sympy.sqrt(2) / sympy.sqrt(sympy.pi)),     # GPT-2's tanh-GELU
    (1 / math.sqrt(128), 1 / sympy.sqrt(128)),                           # an attention scale
    (2 / math.sqrt(math.pi), 2 / sympy.sqrt(sympy.pi)),                  # erf'(0)
    (1 / math.sqrt(2 * math.pi), 1 / sympy.sqrt(2 * sympy.pi)),          # the normal density
    (math.pi, sympy.pi),
    (-1 / math.sqrt(2), -1 / sympy.sqrt(2)),
    (1 / 3, Fraction(1, 3)),
])
def test_closed_forms_are_read_exactly(x, exact):
    r = read_float(x)
    assert r is not None
    assert sympy.simplify(sympy.nsimplify(r.value) - sympy.nsimplify(exact)) == 0
    assert abs(float(r.value) - x) <= 4 * math.ulp(x)


@given(p=st.integers(1, 60), q=st.integers(1, 60), k=st.sampled_from([0, 1, -1]))
def test_sqrt_of_a_rational_times_a_power_of_pi_round_trips(p, q, k):
    """Whatever small closed form the user computes with math, it comes back exactly."""
    x = math.sqrt(p / q) * math.pi ** (k / 2)
    exact = sympy.sqrt(sympy.Rational(p, q)) * sympy.pi ** sympy.Rational(k, 2)
    r = read_float(x)
    if len(repr(x).replace("-", "").replace(".", "").lstrip("0")) <= 10:
        return   # a short decimal is read as that decimal by ops.exact, never by read_float
    assert r is not None, x
    assert sympy.simplify(sympy.nsimplify(r.value) - exact) == 0, (x, r)


@pytest.mark.parametrize("x", [0.1 + 0.2, 3e-4 * 0.1 ** (1 / 3), math.e, 0.123456789012345,
                               math.log(2)])
def test_other_long_floats_are_not_guessed(x):
    assert read_float(x) is None


def test_rejection_shows_the_exact_spelling():
    with pytest.raises(SpecError, match=r"0\.30000000000000004 .* write it exactly, e\.g\. "
                                        r"Fraction\(3, 10\) or Fraction\(\"0\.3\"\)"):
        ops.const(0.1 + 0.2)
    assert exact_spelling(0.1 + 0.2) == 'Fraction(3, 10) or Fraction("0.3")'


def test_a_reading_is_recorded_with_the_users_line():
    with collect_readings() as rs:
        c = ops.const(math.sqrt(2 / math.pi))
    assert c.term.attrs[0] == sympy.sqrt(2) / sympy.sqrt(sympy.pi)
    (msg,) = rs
    assert "0.7978845608028654" in msg and "test_constants.py:" in msg
    assert "sympy.sqrt(2)/sympy.sqrt(sympy.pi)" in msg


def test_the_verdict_lists_the_reading(tmp_path):
    from spec_lang import load

    plan = tmp_path / "plan.py"
    plan.write_text(
        "import math\n"
        "from spec_lang import SGD, Dim, Mesh, Plan, Spec, ops, real\n"
        "B, H = Dim('B', 4), Dim('H', 4)\n"
        "def f(p, d):\n"
        "    return ops.sum(ops.tanh(math.sqrt(2 / math.pi) * d['x'] * p['w']))\n"
        "spec = Spec(params={'w': (H,)}, data={'x': real(B, H)}, forward=f, optimizer=SGD())\n"
        "plan = Plan(mesh=Mesh(dp=1), forward=f)\n")
    prob = load(plan)
    assert any("plan.py:5 is read as the exact sympy.sqrt(2)/sympy.sqrt(sympy.pi)" in a
               for a in prob.assumptions), prob.assumptions
