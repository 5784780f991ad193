"""The exporter's prediction of ``proofs/coq/Signs.v`` and ``RulesMerge.v`` (issue 17, docs/coq.md).

Coq's sign analysis (``Signs.sg_node``) is the checker's (``proofs/checker_signs.py``) with sets
at least as large: Coq's semantics is total, and what ``Term.v`` leaves arbitrary (``SIGMOID``,
``TANH``, ``SILU``, ``GELU``, ``LOG``) or what needs a domain Coq does not assume (``mask`` and
``index`` inputs, covering indicators, assumed spec denominators) has every sign there. This
module recomputes Coq's sets and definedness bits over the certificate's rows, and the tests of
the sign-guarded Coq checkers (mul-canon merging powers, add-canon dropping a monomial,
pow-pow), so that :mod:`proofs.coq_subsets` sends to Coq the steps its checkers will prove and
keeps the others back as hypotheses, with the reason: a step the Python sign analysis
justifies and Coq's does not is a visible hypothesis, never a silent acceptance. Nothing here
decides a verdict: a step this module misjudges fails in Coq and is reported as rejected.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from proofs.coq_constants import parse_const, parse_rational

__all__ = ["NEG", "ZERO", "POS", "ANY", "CoqSigns", "sreq", "merge_ok", "keeps_defined",
           "pp_keeps", "pp_sem", "add_dropped", "pmono"]

NEG, ZERO, POS = 1, 2, 4
ANY = NEG | ZERO | POS
NONZERO, NONNEG, NONPOS = NEG | POS, ZERO | POS, NEG | ZERO


def _qint(e: Fraction) -> bool:
    return e.denominator == 1


def smul(a: int, b: int) -> int:
    """``Signs.smul``"""
    n = (a & NEG and b & POS) or (a & POS and b & NEG)
    p = (a & POS and b & POS) or (a & NEG and b & NEG)
    return (NEG if n else 0) | (ZERO if (a | b) & ZERO else 0) | (POS if p else 0)


def sadd(a: int, b: int) -> int:
    """``Signs.sadd``"""
    mixed = bool((a & NEG and b & POS) or (a & POS and b & NEG))
    n = mixed or (a & NEG and b & (NEG | ZERO)) or (a & ZERO and b & NEG)
    z = mixed or (a & ZERO and b & ZERO)
    p = mixed or (a & POS and b & (POS | ZERO)) or (a & ZERO and b & POS)
    return (NEG if n else 0) | (ZERO if z else 0) | (POS if p else 0)


def spow(s: int, e: Fraction) -> int:
    """``Signs.spow``: ``rpow v e`` for ``v`` in ``s`` (Coq's total power)"""
    odd = e.numerator % 2 == 1
    n = s & NEG and _qint(e) and odd
    z = s & ZERO or (s & NEG and not _qint(e))
    p = s & POS or e == 0 or (s & NEG and _qint(e))
    return (NEG if n else 0) | (ZERO if z else 0) | (POS if p else 0)


def ssum(p: int) -> int:
    """``Signs.ssum``"""
    return NONNEG if not p & ~NONNEG else NONPOS if not p & ~NONPOS else ANY


def sreq(e: Fraction) -> int:
    """``Signs.sreq`` (``checker_signs.requirement``)"""
    if _qint(e):
        return ANY if e >= 0 else NONZERO
    return POS if e <= 0 else NONNEG


def _const_sign(v: Any) -> int:
    """``Signs.const_sg`` on the exporter's reading of a constant."""
    x = parse_const(v)
    if x is None:
        return ANY
    if all(q == 0 for q, _ in x):
        return ZERO
    if len(x) == 1:
        return POS if x[0][0] > 0 else NEG
    return ANY


_UNARY_POW = {"RECIP": (Fraction(-1), NONZERO), "SQRT": (Fraction(1, 2), NONNEG),
              "RSQRT": (Fraction(-1, 2), POS)}


class CoqSigns:
    """``Signs.sign_tab`` over a certificate's rows: ``sign[i]``, ``dfn[i]`` (row ids)."""

    def __init__(self, rows: list, unread: set[int]):
        self.rows = rows
        self.sign: list[int] = []
        self.dfn: list[bool] = []
        for i, row in enumerate(rows):
            s, d = self._node(i, row, unread)
            self.sign.append(s)
            self.dfn.append(d)

    def _csg(self, k: int, dims: dict) -> int:
        kd = {n: tuple(sh) for n, sh in self.rows[k][3]}
        own = all(n in dims and dims[n] == sh for n, sh in kd.items())
        return self.sign[k] if own else self.sign[k] | ZERO

    def _node(self, i: int, row: list, unread: set[int]) -> tuple[int, bool]:  # noqa: PLR0911
        op, args, attrs, dims = row
        dims = {n: tuple(sh) for n, sh in dims}
        kids = all(self.dfn[k] for k in args)
        if op == "INPUT":
            return (POS if not args and len(attrs) > 2 and attrs[2] == "positive" else ANY), True
        if op == "CONST":
            return (ANY if i in unread or args else _const_sign(attrs[0])), True
        if op in ("DIM_SIZE", "AXIS_SIZE"):
            return (POS, True) if not args else (ANY, kids)
        if op in ("EXP", "NEG", "CAST", "STOP_GRAD", "RECIP", "SQRT", "RSQRT", "LOG", "POW"):
            if len(args) != 1:
                return ANY, kids if op not in ("RECIP", "SQRT", "RSQRT", "LOG", "POW") else False
            x = args[0]
            c = self._csg(x, dims)
            if op == "EXP":
                return POS, kids
            if op == "NEG":
                return (c & ZERO) | (POS if c & NEG else 0) | (NEG if c & POS else 0), kids
            if op in ("CAST", "STOP_GRAD"):
                return c, kids
            if op == "LOG":
                return ANY, kids and not self.sign[x] & ~POS
            if op == "POW":
                e = parse_rational(attrs[0])
                return spow(c, e), kids and not self.sign[x] & ~sreq(e)
            e, req = _UNARY_POW[op]
            return spow(c, e), kids and not self.sign[x] & ~req
        if op == "MUL":
            s = POS
            for k in reversed(args):
                s = smul(self._csg(k, dims), s)
            return s, kids
        if op == "ADD":
            s = ZERO
            for k in reversed(args):
                s = sadd(self._csg(k, dims), s)
            return s, kids
        if op == "EINSUM":
            s = POS
            for k in reversed(args):
                s = smul(self.sign[k] | ZERO, s)
            return ssum(s), kids
        return ANY, kids


# -- the tests of RulesMerge.v ---------------------------------------------------------------
def base_ok(s: int, la: list[Fraction], ra: list[Fraction]) -> bool:
    """``RulesMerge.base_ok``"""
    if sum(la, Fraction(0)) != sum(ra, Fraction(0)):
        return False
    if s & ZERO and all(e == 0 for e in la) != all(e == 0 for e in ra):
        return False
    if s & NEG:
        ints = all(map(_qint, la)) and all(map(_qint, ra))
        fracs = any(not _qint(e) for e in la) and any(not _qint(e) for e in ra)
        return ints or fracs
    return True


def merge_ok(signs: CoqSigns, pl: list[tuple[int, Fraction]], pr: list[tuple[int, Fraction]]) -> bool:
    """``RulesMerge.merge_ok`` over the bases of both sides"""
    for k in {b for b, _ in pl + pr}:
        if not base_ok(signs.sign[k], [e for b, e in pl if b == k], [e for b, e in pr if b == k]):
            return False
    return True


def keeps_defined(signs: CoqSigns, left: list[tuple[int, int]], right: list[tuple[int, int]]) -> bool:
    """``RulesMerge.keeps_defined`` (``checker_signs.product_keeps_definedness``, Coq's sets)"""
    def req(k: int, side: list[tuple[int, int]]) -> int:
        r = ANY
        for b, q in side:
            if b == k:
                r &= q
        return r
    lb, rb = {b for b, _ in left}, {b for b, _ in right}
    for k in lb:
        s = signs.sign[k]
        if k in rb:
            if s & req(k, left) != s & req(k, right):
                return False
        elif not (signs.dfn[k] and not s & ~req(k, left)):
            return False
    return all(k in lb or signs.dfn[k] for k in rb)


def _spow_py(s: int, e: Fraction) -> int:
    """``RulesMerge.spow_py`` (``checker_signs._pow``)"""
    r = sreq(e)
    even = e.numerator % 2 == 0
    out = (ZERO if s & r & ZERO else 0) | (POS if s & r & POS else 0)
    if s & r & NEG:
        out |= POS if even else NEG
    return out


def pp_keeps(s: int, a: Fraction, b: Fraction) -> bool:
    """``RulesMerge.pp_keeps`` (``checker_signs.pow_pow_keeps_definedness``, Coq's sets)"""
    left = 0
    for one in (NEG, ZERO, POS):
        if sreq(a) & one and not _spow_py(one, a) & ~sreq(b):
            left |= one
    return s & left == s & sreq(a * b)


def pp_sem(s: int, a: Fraction, b: Fraction) -> bool:
    """``RulesMerge.pp_sem``: the sign condition of the pow-pow lemma in Coq's semantics"""
    return not s & NEG or (_qint(a) and _qint(b)) or (not _qint(a * b) and not _qint(a))


def pmono(rows: list, t: int) -> tuple[int, ...]:
    """``RulesMerge.pmono``"""
    op, args = rows[t][0], rows[t][1]
    if op == "CONST":
        return ()
    if op == "MUL":
        return tuple(sorted(z for z in args if rows[z][0] != "CONST"))
    return (t,)


def add_dropped(rows: list, fl: list[int], fr: list[int]) -> list[int]:
    """``RulesMerge.add_dropped``: factors of the monomials one side has and the other lacks"""
    ml, mr = [pmono(rows, t) for t in fl], [pmono(rows, t) for t in fr]
    return [f for m in ml if m not in mr for f in m] + [f for m in mr if m not in ml for f in m]
