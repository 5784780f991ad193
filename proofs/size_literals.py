"""Size literals: which dims an exact constant of a goal may stand for (Rule L, docs/soundness.md).

A plan may write a size as a literal: ``1/8`` for ``1/|B|``, ``1/192`` for the mean over three
dims, ``36`` for the causal-mask count ``S(S+1)/2`` at ``S = 8``, ``1/sqrt(128)`` for
``|HD|^(-1/2)``. Such a literal keeps its value when the dims shrink, so a goal that is equal at
the real sizes may differ at reduced ones. This module names, for every literal of a goal, every
dim it *may* encode: a dim ``d`` is a suspect of a literal ``c`` when the numerator or the
denominator of ``c`` or of ``c**2`` is a product of *any* number of factors (repetition allowed,
so powers are included) drawn from

* the real size ``|x|`` of every dim and mesh axis ``x``,
* the causal counts ``|x|(|x|+1)/2`` and ``|x|(|x|-1)/2`` of every dim ``x``,

with at least one factor belonging to ``d``. Literals are ``CONST`` values and ``RANK_CONST``
values; integers below 2 encode nothing. It is part of the checker's trusted base (standard
library only; sympy numbers are read by duck typing, never imported).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

__all__ = ["literal_suspects", "literal_values"]

MAX_LITERAL = 1 << 62   # integers above this are not searched (no product of sizes is that big)


def _rational(x: Any) -> Fraction | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, Fraction)):
        return Fraction(x)
    if getattr(x, "is_Rational", False):
        return Fraction(int(x.p), int(x.q))
    return None


def literal_values(nodes: Sequence[Any], order: Iterable[int]) -> dict[int, str]:
    """Integers >= 2 that a literal below the nodes ``order`` is built from (numerators and
    denominators of each literal and of its square) -> the literal, as text."""
    out: dict[int, str] = {}
    for i in order:
        op, _, attrs, _ = nodes[i]
        if op == "CONST":
            vals = [attrs[0]] if attrs else []
        elif op == "RANK_CONST":
            vals = list(attrs[1]) if len(attrs) > 1 else []
        else:
            continue
        for v in vals:
            forms = [_rational(v)]
            try:
                forms.append(_rational(v * v))
            except Exception:  # noqa: BLE001 -- an attribute without arithmetic encodes nothing
                pass
            for q in forms:
                if q is None:
                    continue
                for n in (abs(q.numerator), q.denominator):
                    if 2 <= n <= MAX_LITERAL:
                        out.setdefault(n, str(v))
    return out


def literal_suspects(nodes: Sequence[Any], order: Iterable[int], binding: Mapping[str, int],
                     dims: Iterable[str], axes: Iterable[str]) -> dict[str, str]:
    """Dim -> a literal that may encode a size involving it (see the module docstring).

    Args:
        nodes, order: kernel node rows and the ids of the goal's nodes.
        binding: the real sizes.
        dims, axes: the goal's dims and the binding's mesh axes.
    """
    factors: dict[int, set[str]] = {}   # factor value -> dims it belongs to ("" for an axis)
    for d in dims:
        n = int(binding[d])
        for f in (n, n * (n + 1) // 2, n * (n - 1) // 2):
            if f >= 2:
                factors.setdefault(f, set()).add(d)
    for a in axes:
        if int(binding[a]) >= 2:
            factors.setdefault(int(binding[a]), set()).add("")
    memo: dict[int, bool] = {1: True}

    def product(v: int) -> bool:
        """Is ``v`` a product of factors? (iterative over the divisor chain, memoised)"""
        stack = [v]
        while stack:
            x = stack[-1]
            if x in memo:
                stack.pop()
                continue
            todo = [x // f for f in factors if x % f == 0 and x // f not in memo]
            if todo:
                stack.extend(todo)
                continue
            memo[x] = any(memo[x // f] for f in factors if x % f == 0)
            stack.pop()
        return memo[v]

    out: dict[str, str] = {}
    for v, text in literal_values(nodes, order).items():
        for f, owners in factors.items():
            if v % f == 0 and product(v // f):
                for d in owners:
                    if d:
                        out.setdefault(d, f"the literal {text} may encode a size of {d}")
    return out
