"""Exact scalar residues: rational identities between elementwise expressions (a ``Cas`` step).

Two normal forms that differ only by an identity of rational functions (norm statistics under
a hidden split, a factored versus an expanded scale, ``a/b + c/d`` written two ways) are equal
elementwise: ``ADD``, ``MUL`` and ``POW`` act position by position (broadcasting by dim name), so
a polynomial identity between their operands holds at every position.

:func:`cas_equal` reads each side as a rational function of *atoms*: maximal subterms that are not
``ADD``/``MUL``/``CONST``/``POW`` (an EINSUM, an EXP, a SHARD, an input ...), each one sympy
symbol per distinct node. ``POW(x, p/q)`` with ``q > 1`` is ``r^p`` for the atom ``r = x^(1/q)``
(``x >= 0`` where defined). Then, with ``l = nl/dl`` and ``r = nr/dr`` from ``sympy.together``,
it checks ``expand(nl*dr - nr*dl) == 0`` exactly, never ``simplify``. The denominators ``dl``,
``dr`` are side conditions (non-zero wherever the terms are defined; the prover lists them).

The step is self-contained: a checker regenerates the atoms and the polynomial from the two
terms and repeats the expansion (``docs/rules.md`` section 6).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import sympy

from spec_lang.term import Op, Term

from rewriting import build as b

__all__ = ["CasResult", "cas_equal", "to_sympy"]


@dataclass
class CasResult:
    equal: bool
    reason: str
    atoms: dict[str, Term] = field(default_factory=dict)
    denominators: list[str] = field(default_factory=list)


class _Atoms:
    def __init__(self) -> None:
        self.sym: dict[tuple[int, int], sympy.Symbol] = {}
        self.terms: dict[str, Term] = {}

    def get(self, t: Term, root: int = 1) -> sympy.Symbol:
        k = (id(t), root)
        s = self.sym.get(k)
        if s is None:
            name = f"a{len(self.sym)}" if root == 1 else f"a{len(self.sym)}_r{root}"
            s = self.sym[k] = sympy.Symbol(name, real=True, positive=root > 1 or None)
            self.terms[name] = t
        return s


def to_sympy(t: Term, atoms: _Atoms) -> sympy.Expr:
    """``t`` as a rational function of atoms (children first, no recursion)."""
    memo: dict[int, sympy.Expr] = {}
    order = b._missing(t, lambda m: id(m) in memo or m.op not in (Op.ADD, Op.MUL, Op.POW))
    for n in order:
        memo[id(n)] = _node(n, memo, atoms)
    if id(t) in memo:
        return memo[id(t)]
    return _leaf(t, atoms)


def _leaf(t: Term, atoms: _Atoms) -> sympy.Expr:
    if t.op is Op.CONST:
        v = b.num(t.attrs[0])
        return sympy.Rational(v.numerator, v.denominator) if isinstance(v, Fraction) else v
    return atoms.get(t)


def _val(c: Term, memo, atoms) -> sympy.Expr:
    return memo[id(c)] if id(c) in memo else _leaf(c, atoms)


def _node(n: Term, memo, atoms: _Atoms) -> sympy.Expr:
    match n.op:
        case Op.ADD:
            return sympy.Add(*[_val(c, memo, atoms) for c in n.args])
        case Op.MUL:
            return sympy.Mul(*[_val(c, memo, atoms) for c in n.args])
        case Op.POW:
            e = Fraction(n.attrs[0])
            if e.denominator == 1:
                return sympy.Pow(_val(n.args[0], memo, atoms), int(e))
            return sympy.Pow(atoms.get(n.args[0], e.denominator), e.numerator)
        case _:
            raise AssertionError(n.op)


def cas_equal(lhs: Term, rhs: Term) -> CasResult:
    """Decide ``lhs == rhs`` as rational functions of their atoms (see the module docstring)."""
    if {d for d in lhs.dims} != {d for d in rhs.dims}:
        return CasResult(False, "different dims")
    atoms = _Atoms()
    el, er = to_sympy(lhs, atoms), to_sympy(rhs, atoms)
    nl, dl = sympy.fraction(sympy.together(el))
    nr, dr = sympy.fraction(sympy.together(er))
    diff = sympy.expand(nl * dr - nr * dl)
    dens = [str(d) for d in (dl, dr) if d != 1]
    if diff == 0:
        return CasResult(True, "polynomial identity after cross-multiplication", atoms.terms, dens)
    return CasResult(False, "not a rational identity of the atoms", atoms.terms, dens)
