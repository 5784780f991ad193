"""Which rule steps fall inside what a *partial* Coq rule checker proves (issue 17, docs/coq.md).

Some rules have a Coq checker for the instances that need no side condition Coq cannot see:
``mul-canon`` is checked in Coq (``proofs/coq/RulesCanon.v``) when, once nested products are
flattened on both sides and positive integer powers ``POW(b, k)`` (``k <= 64``) read as ``k``
copies of ``b``, the non-constant factors are the same multiset and only the constants differ
(their products compared exactly in Coq): ``x * x = x^2`` is checked. Instances that merge other
powers (``x^-1 * x = 1`` needs ``x != 0``, the rule's sign guard) are exported as hypotheses
instead, with the reason returned here; any other step goes to Coq, which rejects it if its
factors differ.
``einsum-mul-canon`` likewise (``RulesEinsumMul.v``): checked when the operands of both sides
are the same multiset once the ``MUL`` operands are flattened; steps that merge powers are kept
back.
``pow-const`` is checked for integer exponents (``RulesPow.v``: ``c^e`` folded exactly); a
non-integer exponent, or a constant the exporter reads as an input, keeps the step back.
``add-canon`` likewise (``RulesCanon.v``: sums compared as linear combinations of monomials),
except the steps where a monomial's coefficients cancel on a side (``x^-1 - x^-1 = 0`` needs
``x != 0``: the rule's sign guard, which Coq's total semantics cannot express) or a coefficient
is irrational (kept back so that no radical identity stands in for that guard).

This test only routes steps; it decides nothing. A step it sends to Coq is checked there by the
rule's Coq checker (a slip here makes that step fail in Coq, reported as rejected); a step it
keeps back is reported as taken as a hypothesis, never as Coq-checked.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from typing import Any

from proofs.coq_constants import parse_const, parse_rational

__all__ = ["outside_coq_subset"]

CANON_FUEL = 64       # Canon.flat's nesting depth in RulesCanon.v (canon_fuel)


def _dims(rows: list, x: int) -> dict[str, tuple]:
    return {n: tuple(s) for n, s in rows[x][3]}


def _ids_ok(rows: list, l: Any, r: Any) -> bool:
    return all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < len(rows)
               for x in (l, r))


def _incl(a: dict, b: dict) -> bool:
    return all(n in b and b[n] == s for n, s in a.items())


def _flat(rows: list, xs: list[int], parent: dict, fuel: int, op: str = "MUL") -> list[int] | None:
    """Canon.flat on MUL or ADD: nested products (sums) expanded when their dims are among the
    parent's and their children's among theirs; None where Coq's flat fails."""
    out: list[int] = []
    for x in xs:
        if rows[x][0] == op:
            dx = _dims(rows, x)
            if fuel == 0 or not _incl(dx, parent) or \
                    not all(_incl(_dims(rows, z), dx) for z in rows[x][1]):
                return None
            inner = _flat(rows, rows[x][1], dx, fuel - 1, op)
            if inner is None:
                return None
            out.extend(inner)
        else:
            out.append(x)
    return out


def _mul_canon(rows: list, step: dict[str, Any], unread: set[int]) -> str | None:
    l, r = step.get("lhs"), step.get("rhs")
    if not _ids_ok(rows, l, r):
        return None                       # malformed: let Coq reject it
    if rows[l][0] != "MUL":
        return None
    fl = _flat(rows, rows[l][1], _dims(rows, l), CANON_FUEL)
    fr = _flat(rows, [r], _dims(rows, r), CANON_FUEL)
    if fl is None or fr is None:
        return "rule mul-canon: a nested product has dims outside its parent's"

    def factors(fs: list[int]) -> Counter:
        return Counter(x for x in fs if not (rows[x][0] == "CONST" and not rows[x][1]
                                             and not rows[x][3] and x not in unread))
    left, right = factors(fl), factors(fr)
    merges = any(rows[x][0] == "POW" or n > 1 for side in (left, right) for x, n in side.items())
    if left != right and merges and _pexp(rows, left) != _pexp(rows, right):
        return "rule mul-canon merges powers (sign guard; not in Coq's checker)"
    return None          # same factors up to positive integer powers, or no powers: Coq decides


POW_EXPAND_MAX = 64   # RulesCanon.pexp: POW(b, k) is k copies of b for 1 <= k <= 64


def _pexp(rows: list, factors: Counter) -> Counter:
    """RulesCanon.pexp on a multiset of factors: a positive integer power of a base whose dims
    are among the power's counts as that many copies of the base."""
    out: Counter = Counter()
    for x, n in factors.items():
        row = rows[x]
        if row[0] == "POW" and len(row[1]) == 1:
            e = parse_rational(row[2][0])
            b = row[1][0]
            if e is not None and e.denominator == 1 and 1 <= e <= POW_EXPAND_MAX and \
                    _incl(_dims(rows, b), _dims(rows, x)):
                out[b] += n * int(e)
                continue
        out[x] += n
    return out


def _add_canon(rows: list, step: dict[str, Any], unread: set[int]) -> str | None:
    l, r = step.get("lhs"), step.get("rhs")
    if not _ids_ok(rows, l, r):
        return None
    if rows[l][0] != "ADD":
        return None
    fl = _flat(rows, rows[l][1], _dims(rows, l), CANON_FUEL, "ADD")
    fr = _flat(rows, [r], _dims(rows, r), CANON_FUEL, "ADD")
    if fl is None or fr is None:
        return "rule add-canon: a nested sum has dims outside its parent's"

    def const(x: int) -> Fraction | None | bool:
        """the rational value of a scalar constant; None: not a constant; False: irrational"""
        if not (rows[x][0] == "CONST" and not rows[x][1] and not rows[x][3] and x not in unread):
            return None
        v = parse_const(rows[x][2][0])
        return v[0][0] if v is not None and len(v) == 1 and not v[0][1] else (
            Fraction(0) if v == () else False)

    for terms in (fl, fr):                      # RulesCanon.term_key, side by side
        tot: dict[tuple, Fraction] = {}
        for t in terms:
            k, cf = (t,), const(t)
            if cf is False:
                return "rule add-canon: an irrational coefficient (not in Coq's checker)"
            if cf is not None:
                k = ()
            elif rows[t][0] == "MUL" and all(_incl(_dims(rows, z), _dims(rows, t))
                                             for z in rows[t][1]):
                cs = [const(z) for z in rows[t][1]]
                if any(v is False for v in cs):
                    return "rule add-canon: an irrational coefficient (not in Coq's checker)"
                k = tuple(sorted(z for z, v in zip(rows[t][1], cs) if v is None))
                cf = Fraction(1)
                for v in cs:
                    cf *= v if v is not None else 1
            tot[k] = tot.get(k, Fraction(0)) + (Fraction(1) if cf is None else cf)
        if any(v == 0 for v in tot.values()):
            return "rule add-canon cancels a monomial (sign guard; not in Coq's checker)"
    return None


def _einsum_mul_canon(rows: list, step: dict[str, Any], unread: set[int]) -> str | None:
    l, r = step.get("lhs"), step.get("rhs")
    if not _ids_ok(rows, l, r):
        return None
    if rows[l][0] != "EINSUM" or rows[r][0] != "EINSUM":
        return None
    union: dict[str, tuple] = {}                # RulesEinsumMul.udims: each name's first spec
    for x in rows[l][1]:
        for n, sh in rows[x][3]:
            union.setdefault(n, tuple(sh))
    fl = _flat(rows, rows[l][1], union, CANON_FUEL)
    if fl is None:
        return "rule einsum-mul-canon: a nested product has dims outside the operands' union"
    left, right = Counter(fl), Counter(rows[r][1])
    merges = any(rows[x][0] == "POW" or n > 1 for side in (left, right) for x, n in side.items())
    if left != right and merges:
        return "rule einsum-mul-canon merges powers (sign guard; not in Coq's checker)"
    return None          # the same factors, or different ones without powers: Coq decides


def _pow_const(rows: list, step: dict[str, Any], unread: set[int]) -> str | None:
    l, r = step.get("lhs"), step.get("rhs")
    if not _ids_ok(rows, l, r):
        return None
    if rows[l][0] != "POW" or len(rows[l][1]) != 1:
        return None
    e = parse_rational(rows[l][2][0])
    if e is not None and e.denominator != 1:
        return "rule pow-const with a non-integer exponent (not in Coq's checker)"
    if rows[l][1][0] in unread or r in unread:
        return "rule pow-const: a constant the exporter cannot read"
    return None


_SUBSETS = {"mul-canon": _mul_canon, "add-canon": _add_canon,
            "einsum-mul-canon": _einsum_mul_canon, "pow-const": _pow_const}


def outside_coq_subset(rule: str, rows: list, step: dict[str, Any], unread: set[int]) -> str | None:
    """Why the rule step is outside what its Coq checker proves (export it as a hypothesis), or
    None (send it to the Coq checker)."""
    f = _SUBSETS.get(rule)
    return None if f is None else f(rows, step, unread)
