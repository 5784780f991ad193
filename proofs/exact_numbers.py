"""Exact constants in a certificate: a strict grammar, parsed without evaluating any text.

Part of the checker's trusted base (``docs/trusted-base.md``). A certificate states a number in
one of two closed JSON forms, each parsed by regular expressions into integers; nothing of the
certificate is passed to ``eval``, ``sympify`` or an import (issue 10, family 5):

* ``{"q": "P/Q"}``: a rational, in lowest terms, ``Q > 0``, ``0`` as ``"0/1"``; ``P`` and ``Q``
  decimal integers of at most :data:`MAX_DIGITS` digits, no sign on ``Q``, no leading zeros,
  no spaces, underscores, exponents, decimals, ``nan`` or ``inf``.
* ``{"alg": [[C, [[B, "A/D"], ...]], ...]}``: a real *radical sum* ``sum_t C_t * prod_f
  B_f^(A_f/D_f)``: ``C`` a rational as above, ``B`` an integer ``>= 2`` (a string, at most
  :data:`MAX_DIGITS` digits), ``A/D`` a rational exponent with ``0 < A < D`` and ``D`` at most
  :data:`MAX_EXP_DIGITS` digits. This is the form sympy's automatic evaluation gives to sums,
  products and rational powers of positive rationals (``1/sqrt(128)`` is
  ``[["1/16", [["2", "1/2"]]]]``: ``sqrt(2)/16``). A factor may also be ``["pi", "A/D"]``,
  ``pi^(A/D)`` with ``A/D`` a nonzero rational (``A`` may be negative): GELU's tanh form needs
  ``sqrt(2/pi)`` = ``[["1/1", [["2", "1/2"], ["pi", "-1/2"]]]]``; integer factors come first. At
  most :data:`MAX_TERMS` terms and :data:`MAX_FACTORS` factors in all.

Only the canonical spelling of a number is accepted: the decoder builds the sympy number from
the parsed integers (``Integer``, ``Rational`` and ``Pow`` of integers; construction, not
parsing), re-encodes it with :func:`encode_number` and requires the same JSON. So a number has
one spelling (the Merkle hashes of ``proofs/kernel.py`` stay a function of the value), a rational
never hides in the ``alg`` form, and a term's factors and a sum's terms come in one order.

The producer's copy of :func:`encode_number` is ``spec_lang/exact_numbers.py`` (a test keeps
the two equal on random radical sums).
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from math import gcd
from typing import Any

__all__ = ["MAX_DIGITS", "MAX_EXP_DIGITS", "MAX_TERMS", "MAX_FACTORS", "ExactError",
           "parse_rational", "decode_number", "encode_number"]

MAX_DIGITS = 4000      # digits of a numerator, denominator or radical base (under
#                        Python's 4300-digit int<->str limit; Muon's 5 Newton-Schulz steps fold to
#                        rationals of ~700 digits, tests/bugs/test_optimizer.py)
MAX_EXP_DIGITS = 6     # digits of a radical exponent's denominator
MAX_TERMS = 32         # terms of a radical sum
MAX_FACTORS = 64       # radical factors of a radical sum, all terms together

_RATIONAL = re.compile(r"(0|-?[1-9][0-9]{0,%d})/([1-9][0-9]{0,%d})" % (MAX_DIGITS - 1,
                                                                       MAX_DIGITS - 1))
_BASE = re.compile(r"[1-9][0-9]{0,%d}" % (MAX_DIGITS - 1))
_EXPONENT = re.compile(r"([1-9][0-9]{0,%d})/([1-9][0-9]{0,%d})" % (MAX_EXP_DIGITS - 1,
                                                                   MAX_EXP_DIGITS - 1))
_PI_EXPONENT = re.compile(r"(-?[1-9][0-9]{0,%d})/([1-9][0-9]{0,%d})" % (MAX_EXP_DIGITS - 1,
                                                                        MAX_EXP_DIGITS - 1))


class ExactError(ValueError):
    """A constant is not in the grammar (the checker reports the certificate as malformed)."""


def _short(x: Any) -> str:
    s = json.dumps(x) if not isinstance(x, str) else repr(x)
    return s if len(s) <= 60 else s[:57] + "..."


def parse_rational(s: Any) -> Fraction:
    """``"P/Q"`` in lowest terms -> ``Fraction(P, Q)``.

    Raises:
        ExactError: not a string of the grammar, not in lowest terms, or too long.
    """
    m = _RATIONAL.fullmatch(s) if isinstance(s, str) else None
    if m is None:
        raise ExactError(f"rational {_short(s)} is not \"P/Q\" (decimal integers, at most "
                         f"{MAX_DIGITS} digits, Q > 0, no spaces, signs on Q or other forms)")
    p, q = int(m.group(1)), int(m.group(2))
    if gcd(p, q) != 1 or (p == 0 and q != 1):
        raise ExactError(f"rational {_short(s)} is not in lowest terms")
    return Fraction(p, q)


def decode_number(x: Any) -> Any:
    """The number of ``{"q": ...}`` (a ``Fraction``) or ``{"alg": ...}`` (a sympy number).

    Raises:
        ExactError: anything else, or a non-canonical spelling (see the module docstring).
    """
    if not isinstance(x, dict) or len(x) != 1:
        raise ExactError(f"constant {_short(x)} is not {{\"q\": ...}} or {{\"alg\": ...}}")
    if "q" in x:
        return parse_rational(x["q"])
    terms = x.get("alg")
    if not isinstance(terms, list) or not 1 <= len(terms) <= MAX_TERMS:
        raise ExactError(f"constant {_short(x)}: \"alg\" is not a list of 1 to {MAX_TERMS} terms")
    parsed: list[tuple[Fraction, list[tuple[int, Fraction]]]] = []
    n_factors = 0
    for t in terms:
        if not (isinstance(t, list) and len(t) == 2 and isinstance(t[1], list)):
            raise ExactError(f"constant {_short(x)}: a term is not [coefficient, [factors]]")
        coef = parse_rational(t[0])
        factors = []
        for f in t[1]:
            if not (isinstance(f, list) and len(f) == 2 and isinstance(f[0], str)
                    and isinstance(f[1], str)):
                raise ExactError(f"constant {_short(x)}: a factor is not [\"base\", \"A/D\"]")
            if f[0] == "pi":          # pi^(A/D), A/D a nonzero rational (GELU's sqrt(2/pi))
                m = _PI_EXPONENT.fullmatch(f[1])
                if m is None or gcd(abs(int(m.group(1))), int(m.group(2))) != 1:
                    raise ExactError(f"constant {_short(x)}: pi's exponent {_short(f[1])} is "
                                     f"not a nonzero \"A/D\" in lowest terms")
                factors.append((0, Fraction(int(m.group(1)), int(m.group(2)))))
                continue
            if _BASE.fullmatch(f[0]) is None or f[0] == "1":
                raise ExactError(f"constant {_short(x)}: radical base {_short(f[0])} is not an "
                                 f"integer >= 2 of at most {MAX_DIGITS} digits")
            m = _EXPONENT.fullmatch(f[1])
            if m is None:
                raise ExactError(f"constant {_short(x)}: exponent {_short(f[1])} is not \"A/D\" "
                                 f"(at most {MAX_EXP_DIGITS} digits)")
            a, d = int(m.group(1)), int(m.group(2))
            if not 0 < a < d or gcd(a, d) != 1:
                raise ExactError(f"constant {_short(x)}: exponent {f[1]} is not in lowest terms "
                                 f"strictly between 0 and 1")
            factors.append((int(f[0]), Fraction(a, d)))
        n_factors += len(factors)
        if n_factors > MAX_FACTORS:
            raise ExactError(f"constant {_short(x)}: more than {MAX_FACTORS} radical factors")
        parsed.append((coef, factors))
    import sympy

    value = sympy.Add(*[
        sympy.Rational(c.numerator, c.denominator)
        * sympy.Mul(*[sympy.Pow(sympy.pi if b == 0 else sympy.Integer(b),
                                sympy.Rational(e.numerator, e.denominator))
                      for b, e in fs])
        for c, fs in parsed])
    try:
        again = encode_number(value)
    except ExactError:
        again = None
    if again != x:
        raise ExactError(f"constant {_short(x)} is not the canonical spelling of its value "
                         f"({_short(again)})")
    return value


def encode_number(v: Any) -> dict[str, Any]:
    """The JSON form of an exact number: a ``Fraction``/``int``/sympy rational as ``{"q"}``, a
    sympy radical sum as ``{"alg"}``.

    Raises:
        ExactError: ``v`` is not a rational or a real radical sum of the grammar (``e``,
            ``log(2)``, a float, a nested radical ``sqrt(1 + sqrt(2))``, ``1/(1 + sqrt(2))``).
    """
    if isinstance(v, bool):
        raise ExactError(f"boolean {v!r} is not a number")
    if isinstance(v, int | Fraction):
        v = Fraction(v)
        return {"q": _rational_text(v.numerator, v.denominator)}
    if not type(v).__module__.startswith("sympy") or not getattr(v, "is_number", False):
        raise ExactError(f"{v!r} (a {type(v).__name__}) is not an exact number")
    if v.is_Rational:
        return {"q": _rational_text(int(v.p), int(v.q))}
    import sympy

    terms = []
    n_factors = 0
    for t in sympy.Add.make_args(v):
        c, rest = t.as_coeff_Mul()
        if not c.is_Rational:
            raise ExactError(f"{v} has a coefficient {c} that is not rational")
        factors = []
        for f in sympy.Mul.make_args(rest):
            if f == 1:
                continue
            if f is sympy.pi or (f.is_Pow and f.base is sympy.pi and f.exp.is_Rational
                                 and f.exp != 0):
                e = sympy.Integer(1) if f is sympy.pi else f.exp   # GELU's sqrt(2/pi)
                factors.append((1, 0, int(e.p), int(e.q)))
                continue
            if not (f.is_Pow and f.base.is_Integer and f.base > 1 and f.exp.is_Rational
                    and 0 < f.exp < 1):
                raise ExactError(f"{v} is not a sum of rational multiples of rational powers "
                                 f"of integers and pi (factor {f})")
            factors.append((0, int(f.base), int(f.exp.p), int(f.exp.q)))
        factors.sort()
        n_factors += len(factors)
        terms.append([_rational_text(int(c.p), int(c.q)),
                      [["pi" if k else str(b), f"{p}/{q}"] for k, b, p, q in factors]])
    terms.sort(key=lambda t: json.dumps(t[1]))
    out = {"alg": terms}
    if not 1 <= len(terms) <= MAX_TERMS or n_factors > MAX_FACTORS or any(
            (_PI_EXPONENT.fullmatch(e) is None if b == "pi"
             else _BASE.fullmatch(b) is None or _EXPONENT.fullmatch(e) is None)
            for _, fs in terms for b, e in fs):
        raise ExactError(f"{_short(out)} exceeds the certificate's bounds on exact constants")
    return out


def _rational_text(p: int, q: int) -> str:
    if max(abs(p), q).bit_length() > 4 * MAX_DIGITS:  # far too long (and before str() of it)
        raise ExactError(f"a rational of {max(abs(p), q).bit_length()} bits exceeds "
                         f"{MAX_DIGITS} digits")
    s = f"{p}/{q}"
    if _RATIONAL.fullmatch(s) is None:
        raise ExactError(f"rational {s[:40]}... has more than {MAX_DIGITS} digits")
    return s
