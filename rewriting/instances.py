"""Small helpers for the rules' instance samplers (random shapes, bindings and inputs).

Samplers sit right under their rule (STYLE rule 12); these helpers keep them to a few lines.
Every sampled binding gives each mesh axis at least 2 coordinates and each dim a size that
every product of axes divides, so any dim can be sharded over any nesting of axes with at
least 2 elements per shard.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

from spec_lang.term import Binding, DimSpec, Op, Term

from rewriting import build as b
from rewriting.rule import Draw

__all__ = ["AXES", "DIMS", "draw_binding", "fresh", "fresh_index", "draw_const", "draw_dims",
           "nonzero_base", "maybe_zero_base"]

AXES = ("dp", "tp", "cp", "mb")
DIMS = ("B", "S", "H", "F")

_COUNTER = itertools.count()


def draw_binding(draw: Draw) -> Binding:
    sizes = {a: draw.choice([2, 3]) if a != "tp" else draw.choice([2, 4]) for a in AXES}
    n = 1
    for a in AXES:
        n *= sizes[a]
    for d in DIMS:
        sizes[d] = n  # divisible by every product of distinct axes
    sizes["V"] = n
    return Binding(sizes)


def fresh(dims: list[DimSpec | str | tuple], domain: str = "real", prefix: str = "x") -> Term:
    """A new INPUT (unique name) with these dims (full-size dims: shards are SHARD nodes)."""
    return b.inp(f"{prefix}{next(_COUNTER)}", dims, "param", domain)


def fresh_index(dims: list[DimSpec | str | tuple], index_dim: str) -> Term:
    """A new integer INPUT with values in ``[0, size(index_dim))`` (token ids, labels)."""
    return b.inp(f"idx{next(_COUNTER)}", dims, "data", "index", index_dim)


def draw_const(draw: Draw, nonzero: bool = True) -> Term:
    c = Fraction(draw.int(-4, 4), draw.int(1, 3))
    if nonzero and c == 0:
        c = Fraction(1, 2)
    return b.const(c)


def draw_dims(draw: Draw, k_min: int = 1, k_max: int = 2, avoid: tuple[str, ...] = ()) -> list[str]:
    pool = [d for d in ("B", "S", "H") if d not in avoid]
    k = draw.int(min(k_min, len(pool)), min(k_max, len(pool)))
    out: list[str] = []
    for _ in range(k):
        d = draw.choice([p for p in pool if p not in out])
        out.append(d)
    return out


def _mask(dims: list[str]) -> Term:
    return b.inp(f"mask{next(_COUNTER)}", dims, "data", "mask")


def nonzero_base(draw: Draw, dims: list[str], *, product: bool = True) -> Term:
    """A term with ``dims`` that the input domains make nonzero at every element, by one of the
    derivations of ``rewriting/signs.py`` (a base a cancelling rule may merge or drop);
    ``product=False``: never a ``MUL`` (an operand a product would splice)."""
    k = draw.choice([0, 1, 2, 3, 4] if product else [0, 1, 2, 4])
    if k == 0:
        return fresh(dims, domain="positive")
    if k == 1:
        return b.unary(Op.EXP, fresh(dims))
    if k == 2:  # a square plus a positive epsilon (RMSNorm's radicand)
        return b.add(b.pow_(fresh(dims), 2), b.const(Fraction(1, 100)))
    if k == 3:  # a negative term
        return b.mul(b.const(Fraction(-3, 2)), fresh(dims, domain="positive"))
    # the whole mask's total (the batch has a token) weighted by a positive term
    return b.einsum([_mask(["F"]), fresh(dims, domain="positive")], dims)


def maybe_zero_base(draw: Draw, dims: list[str]) -> Term:
    """A term with ``dims`` that may be 0 at some element of a domain-valid input: a cancelling
    rule must not merge or drop it (the family-3 denominators of issue 10)."""
    k = draw.int(0, 4)
    if k == 0:
        return fresh(dims)
    if k == 1:  # a per-sequence token count (a fully padded sequence has none)
        return b.einsum([_mask(dims + ["F"])], dims)
    if k == 2:  # one rank's share of the token count (an empty rank)
        return b.einsum([b.shard(_mask(["F"]), "F", "dp"), fresh(dims, domain="positive")], dims)
    if k == 3:  # a sum of squares without epsilon
        return b.einsum([b.pow_(fresh(dims + ["F"]), 2)], dims)
    return b.add(fresh(dims, domain="positive"), b.mul(b.const(-1), fresh(dims, domain="positive")))
