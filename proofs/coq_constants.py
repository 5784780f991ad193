"""Exact constants of a certificate, read for the Coq export (docs/coq.md, issue 17).

The grammar is docs/certificate.md's ("Nodes"): ``{"q": "P/Q"}`` rationals in lowest terms,
``{"alg": [[C, [[B, "A/D"], ...]], ...]}`` radical sums ``sum C * prod B^(A/D)`` (``B >= 2``,
``0 < A/D < 1``, at most 32 terms and 64 factors), and plain integers. This module reads them
with its own regular expressions into integers (the checker's reader is
``proofs/exact_numbers.py``; ``tests/proofs/test_coq.py`` compares the two on random radical
sums); nothing is evaluated. A number is a tuple of terms ``(q, ((base, exponent), ...))``,
``Num.v``'s ``num``: ``sum q * prod base^exponent``.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

__all__ = ["Num", "Rad", "parse_const", "parse_rational"]

# A number is a list of (Q, rad) terms, a rad a list of (base, exponent): sum q * prod b^e.
Rad = tuple[tuple[int, Fraction], ...]
Num = tuple[tuple[Fraction, Rad], ...]


def _num_q(q: Fraction) -> Num:
    return ((q, ()),)


def _as_rational(x: Num) -> Fraction | None:
    if len(x) == 1 and not x[0][1]:
        return x[0][0]
    return None


_Q = re.compile(r"(0|-?[1-9][0-9]{0,3999})/([1-9][0-9]{0,3999})")
_BASE = re.compile(r"[1-9][0-9]{0,3999}")
_EXP = re.compile(r"([1-9][0-9]{0,5})/([1-9][0-9]{0,5})")


def _parse_fraction(s: Any) -> Fraction | None:
    m = _Q.fullmatch(s) if isinstance(s, str) else None
    if m is None:
        return None
    q = Fraction(int(m.group(1)), int(m.group(2)))
    if (q.numerator, q.denominator) != (int(m.group(1)), int(m.group(2))):
        return None                                  # not in lowest terms
    return q


def _parse_alg(terms: Any) -> Num | None:
    """``[[C, [[B, "A/D"], ...]], ...]`` -> sum C * prod B^(A/D), or None off the grammar."""
    if not isinstance(terms, list) or not 1 <= len(terms) <= 32:
        return None
    out: list[tuple[Fraction, Rad]] = []
    factors = 0
    for t in terms:
        if not (isinstance(t, list) and len(t) == 2 and isinstance(t[1], list)):
            return None
        c = _parse_fraction(t[0])
        if c is None:
            return None
        rad: list[tuple[int, Fraction]] = []
        for f in t[1]:
            if not (isinstance(f, list) and len(f) == 2 and isinstance(f[0], str)
                    and _BASE.fullmatch(f[0]) and isinstance(f[1], str)):
                return None
            m = _EXP.fullmatch(f[1])
            b = int(f[0])
            if m is None or b < 2:
                return None
            e = Fraction(int(m.group(1)), int(m.group(2)))
            if not 0 < e < 1 or e.numerator != int(m.group(1)):
                return None
            rad.append((b, e))
        factors += len(rad)
        out.append((c, tuple(rad)))
    return None if factors > 64 else tuple(out)


def parse_const(v: Any) -> Num | None:
    """A certificate constant (``{"q": "P/Q"}``, ``{"alg": ...}`` or a plain integer) as a
    number, or None when it is not in the grammar of docs/certificate.md."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return _num_q(Fraction(v))
    if isinstance(v, dict) and set(v) == {"q"}:
        q = _parse_fraction(v["q"])
        return None if q is None else _num_q(q)
    if isinstance(v, dict) and set(v) == {"alg"}:
        return _parse_alg(v["alg"])
    return None


def parse_rational(v: Any) -> Fraction | None:
    n = parse_const(v)
    return None if n is None else _as_rational(n)
