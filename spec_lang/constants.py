"""Reading a Python float as the exact constant the user meant (issue 12, item 3).

Every constant in a term is exact (``docs/dsl.md`` section 3). A float whose shortest decimal
form is short (``1e-5``, ``0.044715``) is that decimal. A *long* float usually comes from
arithmetic in the user's file, and two cases are unambiguous:

* an **irrational closed form** ``s * sqrt(r) * pi**(k/2)``: ``math.sqrt(2 / math.pi)``
  (GPT-2's tanh-GELU, ``0.7978845608028654``), ``1 / math.sqrt(128)`` (an attention scale),
  ``2 / math.sqrt(math.pi)``. It is accepted when it is within :data:`IRRATIONAL_ULPS` units in
  the last place of the closed form (the float arithmetic that produced it rounds a few times);
* a **rational** ``p / q``: accepted only when the float *is* the correctly rounded ``p / q``
  (``1 / 3`` -> ``0.3333333333333333``). ``0.1 + 0.2`` (``0.30000000000000004``) is not the
  rounding of ``3 / 10``: it is rejected, and the message shows the exact spelling.

The search is over small numbers only (:data:`MAX_DENOMINATOR`): a float from an unrelated
computation matches one of them with probability about ``1e-8``, and an accepted reading is
recorded with its source line in the verdict's assumptions (``TraceContext.readings``), so it is
never silent. Anything else is an error whose message gives ``Fraction(...)`` / ``sympy``
spellings to copy.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import sympy

__all__ = ["Reading", "read_float", "exact_spelling", "collect_readings", "note_reading", "IRRATIONAL_ULPS", "MAX_DENOMINATOR"]

IRRATIONAL_ULPS = 4
"""How far (in units in the last place) a float may be from an irrational closed form."""
MAX_DENOMINATOR = 10_000
"""Largest numerator / denominator searched for the rational parts of a closed form."""
_PI_POWERS = (0, 1, -1, 2, -2)   # k in pi**(k/2): sqrt(pi), 1/sqrt(pi), pi, 1/pi


@dataclass(frozen=True)
class Reading:
    """A long float read as an exact constant: ``value`` (Fraction or sympy number) and
    ``spelling``, the exact Python expression to write instead (``sympy.sqrt(2) /
    sympy.sqrt(sympy.pi)``)."""

    value: Any
    spelling: str


def _ulps(a: float, b: float) -> float:
    return abs(a - b) / math.ulp(max(abs(a), abs(b)))


def _small(q: Fraction) -> bool:
    return abs(q.numerator) <= MAX_DENOMINATOR and q.denominator <= MAX_DENOMINATOR


def _spell(v: Any) -> str:
    """``v`` (Fraction or sympy number) as Python source using ``Fraction`` / ``sympy``."""
    if isinstance(v, Fraction):
        return f"Fraction({v.numerator}, {v.denominator})" if v.denominator != 1 \
            else str(v.numerator)
    s = sympy.sstr(v)
    for name in ("sqrt", "pi"):
        s = s.replace(name, f"sympy.{name}")
    return s


def _candidates(x: float):
    """Closed forms ``c * pi**(k/2)`` with ``c`` rational or ``sqrt`` of a rational."""
    for k in _PI_POWERS:
        scale = math.pi ** (k / 2)
        y = x / scale
        pi_part = sympy.pi ** sympy.Rational(k, 2)
        q = Fraction(y).limit_denominator(MAX_DENOMINATOR)
        if _small(q) and q != 0:
            yield sympy.Rational(q.numerator, q.denominator) * pi_part
        sq = Fraction(y * y).limit_denominator(MAX_DENOMINATOR)
        if _small(sq) and sq > 0:
            root = sympy.sqrt(sympy.Rational(sq.numerator, sq.denominator))
            yield (root if y > 0 else -root) * pi_part


def read_float(x: float) -> Reading | None:
    """The exact constant that ``x`` (a finite float with a long decimal form) stands for, or
    ``None`` (module docstring for the rules).

    Returns:
        a :class:`Reading`; its value is a :class:`Fraction` for a rational, else a sympy
        number (``sqrt(2)*sqrt(1/pi)``).
    """
    if not math.isfinite(x) or x == 0:
        return None
    found: dict[str, Any] = {}
    for cand in _candidates(x):
        if cand.is_Rational:
            q = Fraction(int(cand.p), int(cand.q))
            if float(q) == x:
                found.setdefault(str(q), q)
            continue
        if _ulps(float(cand), x) <= IRRATIONAL_ULPS:
            found.setdefault(sympy.sstr(cand), cand)
    if len(found) != 1:
        return None
    (value,) = found.values()
    return Reading(value, _spell(value))


def exact_spelling(x: float) -> str:
    """Spellings to suggest for a float that :func:`read_float` does not accept: the nearest
    small rational (``Fraction(3, 10)`` for ``0.1 + 0.2``) and the 10-digit decimal."""
    q = Fraction(x).limit_denominator(MAX_DENOMINATOR)
    tips = []
    if _small(q) and abs(float(q) - x) <= 8 * math.ulp(x):
        tips.append(_spell(q))
    tips.append(f'Fraction("{x:.10g}")')
    return " or ".join(tips)


# -- readings are never silent: build_problem collects them into the verdict's assumptions ------
_COLLECTORS: list[list[str]] = []


@contextlib.contextmanager
def collect_readings() -> Iterator[list[str]]:
    """Collect, as assumption sentences, every float read as an exact constant inside the block
    (``spec_lang.iteration.build_problem`` wraps the traces in it)."""
    out: list[str] = []
    _COLLECTORS.append(out)
    try:
        yield out
    finally:
        _COLLECTORS.pop()


def note_reading(x: float, r: Reading, site: str) -> None:
    """Record that ``x`` at ``site`` was read as ``r`` (once per site and value)."""
    msg = f"the float {x!r} at {site} is read as the exact {r.spelling}"
    for out in _COLLECTORS:
        if msg not in out:
            out.append(msg)
