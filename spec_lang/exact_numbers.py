"""The exact numbers a constant may hold, and their certificate form (issue 10, family 5).

A constant is a rational or a real *radical sum*: a finite sum of rational multiples of
products of rational powers of integers (``1/sqrt(128)`` is ``sqrt(2)/16``, ``1 + sqrt(2)``),
in the form sympy's automatic evaluation gives it. This class is closed under the sums and
products the rewriting folds (``sympy.expand``) and under rational powers of positive
monomials; ``pi``, ``log(2)``, floats and nested radicals are not in it. Its JSON form is the
one the checker parses with a strict grammar (``proofs/exact_numbers.py``, which holds the
trusted copy of :func:`certificate_form`; a test keeps the two equal):

* ``{"q": "P/Q"}`` for a rational (lowest terms, ``Q > 0``);
* ``{"alg": [[C, [[B, "A/D"], ...]], ...]}`` for ``sum C * prod B^(A/D)`` with ``B >= 2`` an
  integer and ``0 < A/D < 1`` (terms sorted by their factor lists, factors by base).
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from typing import Any

__all__ = ["NotCertifiable", "certificate_form", "certifiable"]

MAX_DIGITS = 4000      # as proofs/exact_numbers.py
MAX_EXP_DIGITS = 6
MAX_TERMS = 32
MAX_FACTORS = 64

_RATIONAL = re.compile(r"(0|-?[1-9][0-9]{0,%d})/([1-9][0-9]{0,%d})" % (MAX_DIGITS - 1,
                                                                       MAX_DIGITS - 1))
_BASE = re.compile(r"[1-9][0-9]{0,%d}" % (MAX_DIGITS - 1))
_EXPONENT = re.compile(r"([1-9][0-9]{0,%d})/([1-9][0-9]{0,%d})" % (MAX_EXP_DIGITS - 1,
                                                                   MAX_EXP_DIGITS - 1))
_PI_EXPONENT = re.compile(r"(-?[1-9][0-9]{0,%d})/([1-9][0-9]{0,%d})" % (MAX_EXP_DIGITS - 1,
                                                                        MAX_EXP_DIGITS - 1))


class NotCertifiable(ValueError):
    """A number outside the class (or its bounds): a certificate cannot state it."""


def certificate_form(v: Any) -> dict[str, Any]:
    """The JSON form of the exact number ``v`` (``int``, ``Fraction`` or a sympy number).

    Raises:
        NotCertifiable: ``v`` is not a rational or a real radical sum within the bounds
            (at most 4000 digits per integer, 32 terms, 64 radical factors).
    """
    if isinstance(v, bool):
        raise NotCertifiable(f"boolean {v!r} is not a number")
    if isinstance(v, int | Fraction):
        v = Fraction(v)
        return {"q": _rational_text(v.numerator, v.denominator)}
    if not type(v).__module__.startswith("sympy") or not getattr(v, "is_number", False):
        raise NotCertifiable(f"{v!r} (a {type(v).__name__}) is not an exact number")
    if v.is_Rational:
        return {"q": _rational_text(int(v.p), int(v.q))}
    import sympy

    terms = []
    n_factors = 0
    for t in sympy.Add.make_args(v):
        c, rest = t.as_coeff_Mul()
        if not c.is_Rational:
            raise NotCertifiable(f"{v} has a coefficient {c} that is not rational")
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
                raise NotCertifiable(f"{v} is not a sum of rational multiples of rational powers "
                                 f"of integers and pi (factor {f})")
            factors.append((0, int(f.base), int(f.exp.p), int(f.exp.q)))
        factors.sort()
        n_factors += len(factors)
        terms.append([_rational_text(int(c.p), int(c.q)),
                      [["pi" if k else str(b), f"{p}/{q}"] for k, b, p, q in factors]])
    terms.sort(key=lambda t: json.dumps(t[1]))
    if not 1 <= len(terms) <= MAX_TERMS or n_factors > MAX_FACTORS or any(
            (_PI_EXPONENT.fullmatch(e) is None if b == "pi"
             else _BASE.fullmatch(b) is None or _EXPONENT.fullmatch(e) is None)
            for _, fs in terms for b, e in fs):
        raise NotCertifiable(f"{v} exceeds the certificate's bounds on exact constants")
    return {"alg": terms}


def certifiable(v: Any) -> bool:
    """Whether :func:`certificate_form` accepts ``v``."""
    if isinstance(v, Fraction) and max(abs(v.numerator), v.denominator).bit_length() < 1300:
        return True  # fewer than 392 digits: the common case, without building the text
    try:
        certificate_form(v)
    except NotCertifiable:
        return False
    return True


def _rational_text(p: int, q: int) -> str:
    if max(abs(p), q).bit_length() > 4 * MAX_DIGITS:
        raise NotCertifiable(f"a rational of {max(abs(p), q).bit_length()} bits exceeds "
                             f"{MAX_DIGITS} digits")
    s = f"{p}/{q}"
    if _RATIONAL.fullmatch(s) is None:
        raise NotCertifiable(f"rational {s[:40]}... has more than {MAX_DIGITS} digits")
    return s
