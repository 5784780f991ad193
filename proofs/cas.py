"""The checker's replay of ``cas`` steps: exact rational identities between elementwise terms.

A ``cas`` step claims ``lhs == rhs`` where both are rational functions (``ADD``, ``MUL``,
``CONST``, ``POW``) of *atoms*: maximal subterms of any other op, one sympy symbol per distinct
node (``POW(x, p/q)`` with ``q > 1`` is ``r^p`` for a positive atom ``r = x^(1/q)``). Both sides
must have the same dims (the ops act position by position, broadcasting by dim name, so an
identity of rational functions holds at every position). The check is exact: with
``l = nl/dl`` and ``r = nr/dr`` (``sympy.together``), ``expand(nl*dr - nr*dl) == 0``, never
``simplify``. Denominators are side conditions (non-zero where the terms are defined), which
the certificate's assumptions state.

Written for the checker from ``docs/rules.md`` section 6; it imports nothing from ``rewriting``.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from proofs.kernel import NodeTable

__all__ = ["cas_identity"]


def _const(v: Any) -> Any:
    import sympy

    if isinstance(v, Fraction):
        return sympy.Rational(v.numerator, v.denominator)
    if isinstance(v, int) and not isinstance(v, bool):
        return sympy.Integer(v)
    if type(v).__module__.startswith("sympy") and getattr(v, "is_number", False):
        return v
    raise ValueError(f"constant {v!r} is not exact")


def _to_sympy(t: NodeTable, root: int, atoms: dict[tuple[int, int], Any]) -> Any:
    import sympy

    def atom(i: int, q: int = 1) -> Any:
        k = (i, q)
        if k not in atoms:
            atoms[k] = sympy.Symbol(f"a{i}" if q == 1 else f"a{i}_r{q}", real=True,
                                    positive=True if q > 1 else None)
        return atoms[k]

    def leaf(i: int) -> Any:
        op, _, attrs, _ = t.nodes[i]
        return _const(attrs[0]) if op == "CONST" else atom(i)

    memo: dict[int, Any] = {}
    stack = [(root, False)]
    while stack:
        i, done = stack.pop()
        op, args, attrs, _ = t.nodes[i]
        if i in memo or op not in ("ADD", "MUL", "POW"):
            continue
        if not done:
            stack.append((i, True))
            stack.extend((c, False) for c in args)
            continue
        vals = [memo[c] if c in memo else leaf(c) for c in args]
        if op == "ADD":
            memo[i] = sympy.Add(*vals)
        elif op == "MUL":
            memo[i] = sympy.Mul(*vals)
        else:
            e = Fraction(attrs[0])
            memo[i] = sympy.Pow(vals[0], int(e)) if e.denominator == 1 else \
                sympy.Pow(atom(args[0], e.denominator), e.numerator)
    return memo[root] if root in memo else leaf(root)


def cas_identity(t: NodeTable, lhs: int, rhs: int) -> str | None:
    """``None`` if ``lhs == rhs`` is an exact rational identity of their atoms, else why not."""
    import sympy

    if dict(t.nodes[lhs][3]) != dict(t.nodes[rhs][3]):
        return "the two sides have different dims"
    atoms: dict[tuple[int, int], Any] = {}
    try:
        el, er = _to_sympy(t, lhs, atoms), _to_sympy(t, rhs, atoms)
    except (ValueError, TypeError, ZeroDivisionError) as e:
        return f"cannot read as rational functions: {e}"
    nl, dl = sympy.fraction(sympy.together(el))
    nr, dr = sympy.fraction(sympy.together(er))
    if sympy.expand(nl * dr - nr * dl) != 0:
        return "not a rational identity of the atoms"
    return None
