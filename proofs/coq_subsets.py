"""Which rule steps fall inside what a *partial* Coq rule checker proves (issue 17, docs/coq.md).

Some rules have a Coq checker for the instances whose side conditions Coq can see:
``mul-canon`` is checked in Coq when, once nested products are flattened on both sides and
positive integer powers ``POW(b, k)`` (``k <= 64``) read as ``k`` copies of ``b``, the
non-constant factors are the same multiset and only the constants differ
(``proofs/coq/RulesCanon.v``: ``x * x = x^2``), and when it merges other powers
(``x^-1 * x = 1``, ``RulesMerge.v``) if Coq's sign analysis (``Signs.v``, predicted by
:mod:`proofs.coq_signs`) shows the rule's guard (the base is defined at the same inputs on
both sides) and the sign condition Coq's total semantics needs. A merge the Python sign
analysis justifies and Coq's does not (a ``mask`` total, a covering causal mask, a sigmoid, an
assumed spec denominator) is exported as a hypothesis, with the reason returned here.
``einsum-mul-canon`` (``RulesEinsumMul.v``): checked when the operands of both sides are the
same multiset once the ``MUL`` operands are flattened; steps that merge powers are kept back.
``pow-const`` is checked for integer exponents (``RulesPow.v``: ``c^e`` folded exactly) and for
non-integer ones of a positive one-term constant (``RulesRadical.v``); another constant, or one
the exporter reads as an input, keeps the step back.
``add-canon`` (``RulesCanon.v``, ``RulesMerge.v``: sums compared as linear combinations of
monomials): a step dropping a monomial (``x^-1 - x^-1 = 0``) goes to Coq when Coq's analysis
shows the dropped factors defined (the rule's guard); a step with an irrational coefficient is
kept back (so that no radical identity stands in for that guard).
``pow-pow`` (``RulesMerge.v``): checked when Coq's analysis shows the rule's definedness guard
and the sign condition of the lemma.

This test only routes steps; it decides nothing. A step it sends to Coq is checked there by the
rule's Coq checker (a slip here makes that step fail in Coq, reported as rejected); a step it
keeps back is reported as taken as a hypothesis, never as Coq-checked.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from typing import Any

from proofs.coq_constants import parse_const, parse_rational
from proofs.coq_signs import (
    ANY, CoqSigns, add_dropped, keeps_defined, merge_ok, pp_keeps, pp_sem, sreq,
)

__all__ = ["outside_coq_subset", "LazySigns"]

NO_SIGN = "(a sign fact Coq's analysis does not derive, proofs/coq/Signs.v)"


class LazySigns:
    """Coq's sign table of a certificate, computed on first use (one per export)."""

    def __init__(self, rows: list, unread: set[int]):
        self.rows, self.unread, self._signs = rows, unread, None

    def __call__(self) -> CoqSigns:
        if self._signs is None:
            self._signs = CoqSigns(self.rows, self.unread)
        return self._signs

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


def _mul_canon(rows: list, step: dict[str, Any], unread: set[int], signs: LazySigns) -> str | None:
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
    if Counter(x for x in fl if x in unread) != Counter(x for x in fr if x in unread):
        return UNREAD.format("mul-canon")   # constants Coq sees as inputs: no product folds them
    merges = any(rows[x][0] == "POW" or n > 1 for side in (left, right) for x, n in side.items())
    if left != right and merges and _pexp(rows, left) != _pexp(rows, right):
        nl, nr = list(left.elements()), list(right.elements())
        sg = signs()
        if not (keeps_defined(sg, [_prd(rows, x) for x in nl], [_prd(rows, x) for x in nr])
                and merge_ok(sg, [_rd(rows, x) for x in nl], [_rd(rows, x) for x in nr])):
            return f"rule mul-canon merges powers {NO_SIGN}"
    return None          # Coq decides (RulesCanon.v, RulesMerge.v)


def _rd(rows: list, x: int) -> tuple[int, Fraction]:
    """RulesMerge.rd: POW(b, e) with b's dims among the power's is (b, e); else (x, 1)"""
    row = rows[x]
    if row[0] == "POW" and len(row[1]) == 1 and _incl(_dims(rows, row[1][0]), _dims(rows, x)):
        return row[1][0], parse_rational(row[2][0])
    return x, Fraction(1)


def _prd(rows: list, x: int) -> tuple[int, int]:
    """RulesMerge.prd (checker_signs.powers): POW(b, e) is b with e's requirement"""
    row = rows[x]
    if row[0] == "POW" and len(row[1]) == 1:
        return row[1][0], sreq(parse_rational(row[2][0]))
    return x, ANY


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


def _add_canon(rows: list, step: dict[str, Any], unread: set[int], signs: LazySigns) -> str | None:
    l, r = step.get("lhs"), step.get("rhs")
    if not _ids_ok(rows, l, r):
        return None
    if rows[l][0] != "ADD":
        return None
    fl = _flat(rows, rows[l][1], _dims(rows, l), CANON_FUEL, "ADD")
    fr = _flat(rows, [r], _dims(rows, r), CANON_FUEL, "ADD")
    if fl is None or fr is None:
        return "rule add-canon: a nested sum has dims outside its parent's"

    dropped = add_dropped(rows, fl, fr)     # RulesMerge.chk_add_canon_g's guard
    if dropped and not all(signs().dfn[f] for f in dropped):
        return f"rule add-canon drops a monomial not shown defined {NO_SIGN}"
    return None


def _einsum_mul_canon(rows: list, step: dict[str, Any], unread: set[int],
                      signs: LazySigns) -> str | None:
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
        ys, sg = list(rows[r][1]), signs()

        def nonconst(xs: list[int]) -> list[int]:
            return [x for x in xs if not (rows[x][0] == "CONST" and not rows[x][1]
                                          and not rows[x][3] and x not in unread)]
        if not (keeps_defined(sg, [_prd(rows, x) for x in nonconst(fl)],
                              [_prd(rows, x) for x in nonconst(ys)])
                and merge_ok(sg, [_rd(rows, x) for x in fl], [_rd(rows, x) for x in ys])):
            return f"rule einsum-mul-canon merges powers {NO_SIGN}"
    return None          # Coq decides (RulesEinsumMul.v)


def _pow_const(rows: list, step: dict[str, Any], unread: set[int], signs: LazySigns) -> str | None:
    l, r = step.get("lhs"), step.get("rhs")
    if not _ids_ok(rows, l, r):
        return None
    if rows[l][0] != "POW" or len(rows[l][1]) != 1:
        return None
    e = parse_rational(rows[l][2][0])
    if rows[l][1][0] in unread or r in unread:
        return "rule pow-const: a constant the exporter cannot read"
    if e is not None and e.denominator != 1:      # RulesRadical.num_qpow: c = one term, q > 0
        c = parse_const(rows[rows[l][1][0]][2][0])
        if c is None or len(c) != 1 or c[0][0] <= 0:
            return "rule pow-const with a non-integer exponent of a constant that is not one " \
                   "positive term (not in Coq's checker)"
    return None


def _pow_pow(rows: list, step: dict[str, Any], unread: set[int], signs: LazySigns) -> str | None:
    l = step.get("lhs")
    if not _ids_ok(rows, l, step.get("rhs")):
        return None
    if rows[l][0] != "POW" or len(rows[l][1]) != 1 or rows[rows[l][1][0]][0] != "POW" or \
            len(rows[rows[l][1][0]][1]) != 1:
        return None
    y = rows[l][1][0]
    x, a, b = rows[y][1][0], parse_rational(rows[y][2][0]), parse_rational(rows[l][2][0])
    if a is None or b is None:
        return None
    s = signs().sign[x]
    if not (pp_keeps(s, a, b) and pp_sem(s, a, b)):
        return f"rule pow-pow {NO_SIGN}"
    return None


UNREAD = "rule {}: a constant the exporter cannot read (Coq sees an input of its own)"


def _unread_near(rule: str, depth: int):
    """A router keeping back a step whose two sides have an unread constant within ``depth``
    levels (the constant-comparing rules: Coq compares constants by their exact values, and
    an unread one is an input there, so the step could only fail in Coq)."""
    def route(rows: list, step: dict[str, Any], unread: set[int], signs: LazySigns,
              inner=None) -> str | None:
        l, r = step.get("lhs"), step.get("rhs")
        if not _ids_ok(rows, l, r):
            return None
        level, seen = [l, r], set()
        for _ in range(depth + 1):
            if any(x in unread for x in level):
                return UNREAD.format(rule)
            seen |= set(level)
            level = [a for x in level for a in rows[x][1] if a not in seen]
        return inner(rows, step, unread, signs) if inner else None
    return route


def _unread_below(rows: list, x: int, unread: set[int], depth: int) -> Counter:
    out: Counter = Counter()
    level = [x]
    for _ in range(depth + 1):
        out.update(y for y in level if y in unread)
        level = [a for y in level for a in rows[y][1]]
    return out


def _add_canon_all(rows: list, step: dict[str, Any], unread: set[int],
                   signs: LazySigns) -> str | None:
    l, r = step.get("lhs"), step.get("rhs")
    if _ids_ok(rows, l, r) and \
            _unread_below(rows, l, unread, 2) != _unread_below(rows, r, unread, 2):
        return UNREAD.format("add-canon")   # the unread constants differ: coefficients change
    return _add_canon(rows, step, unread, signs)


_SUBSETS = {"mul-canon": _mul_canon, "add-canon": _add_canon_all,
            "einsum-mul-canon": _einsum_mul_canon, "pow-const": _pow_const, "pow-pow": _pow_pow,
            "add-content": _unread_near("add-content", 3),
            "concat-content": _unread_near("concat-content", 3),
            "add-scaled-sum": _unread_near("add-scaled-sum", 3)}


def outside_coq_subset(rule: str, rows: list, step: dict[str, Any], unread: set[int],
                       signs: LazySigns | None = None) -> str | None:
    """Why the rule step is outside what its Coq checker proves (export it as a hypothesis), or
    None (send it to the Coq checker). ``signs``: Coq's sign table of ``rows`` (made here when
    not given)."""
    f = _SUBSETS.get(rule)
    return None if f is None else f(rows, step, unread, signs or LazySigns(rows, unread))
