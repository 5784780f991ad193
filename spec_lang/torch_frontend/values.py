"""The values pass 2 computes for graph nodes, and the term helpers every rule shares.

* :class:`TV`: a tensor as an IR term plus its *layout* (per torch dim, the named dims it is the
  row-major product of). The term's dims are a subset of the layout's: a dim in the layout but
  not in the term is a broadcast (``expand``) dim, constant along it.
* :class:`Pieces`: the blocks of a dim cut by ``split`` / ``chunk`` (consumed by ``getitem``).
* :class:`Bucket`: a flat bucket of flattened tensors (:mod:`buckets`).
* :class:`Stacked`: ``torch.stack`` of scalars (the per-parameter norms of
  ``clip_grad_norm_``), consumed by a reduction over the stacked dim.
* python scalars and ``None`` for non-tensor results.

Constants are exact (:func:`exact_scalar`): ints as ``Fraction``; a float literal as its short
decimal (``1e-05``, also when it is the float32 rounding of one, as RMSNorm's ``eps``), a simple
rational or ``1/sqrt(n)`` when its float equals one, else its exact binary value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import sympy

from spec_lang.term import DimSpec, Op, Term, term

__all__ = ["TV", "Pieces", "Bucket", "Stacked", "exact_scalar", "const", "ew", "einsum",
           "local_size_term",
           "names_of", "flat_dims"]


@dataclass(frozen=True)
class TV:
    """A tensor value: ``term`` and its layout ``dims`` (per torch dim, a tuple of DimSpec)."""

    term: Term
    dims: tuple[tuple[DimSpec, ...], ...]

    @property
    def flat(self) -> tuple[DimSpec, ...]:
        return tuple(d for dim in self.dims for d in dim)

    def relabel(self, dims: tuple) -> TV:
        return TV(self.term, dims)


@dataclass(frozen=True)
class Pieces:
    """Blocks ``values`` of one dim (``split``/``chunk`` outputs, taken by ``getitem``);
    ``src`` and ``dim``: the value split and its torch dim (a rank-indexed ``getitem`` is then
    the rank's shard of it)."""

    values: tuple[Any, ...]
    src: Any = None
    dim: int | None = None


@dataclass(frozen=True)
class Bucket:
    """A flat bucket: ``cat`` of the 1-d ``pieces`` (each a flattening of a named-dims value)
    of ``numels`` entries at the trace's sizes (:mod:`~spec_lang.torch_frontend.buckets`)."""

    pieces: tuple[TV, ...]
    numels: tuple[int, ...]

    @property
    def total(self) -> int:
        return sum(self.numels)


@dataclass(frozen=True)
class Stacked:
    """``torch.stack(items)`` of scalar values along a new dim."""

    items: tuple[Term, ...]

    def relabel(self, dims: tuple) -> Stacked:  # noqa: ARG002 -- a view of the stack
        return self


def flat_dims(layout: Sequence[Sequence[DimSpec]]) -> tuple[DimSpec, ...]:
    return tuple(d for dim in layout for d in dim)


def names_of(specs: Sequence[DimSpec]) -> tuple[str, ...]:
    return tuple(d.name for d in specs)


_MAX_DIGITS = 10


def _short(r: str) -> bool:
    mant = r.lower().split("e")[0].replace("-", "").replace(".", "").lstrip("0")
    return len(mant) <= _MAX_DIGITS


def exact_scalar(v: Any) -> Any:
    """An exact number for a python scalar literal of the graph (see the module docstring).

    Raises:
        ValueError: a non-finite float or a non-number.
    """
    if isinstance(v, bool):
        return Fraction(int(v))
    if isinstance(v, int):
        return Fraction(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"non-finite constant {v!r}")
        r = repr(v)
        if _short(r):
            return Fraction(r)
        f32 = np.float32(v)
        if float(f32) == v and _short(repr(f32)):
            return Fraction(repr(f32))
        q = Fraction(v).limit_denominator(10**6)
        if float(q) == v:
            return q
        if v > 0:
            inv2 = 1.0 / (v * v)
            n = round(inv2)
            if n > 0 and float(1 / sympy.sqrt(n)) == v:
                return 1 / sympy.sqrt(n)
            n = round(v * v)
            if n > 0 and float(sympy.sqrt(n)) == v:
                return sympy.sqrt(n)
        return Fraction(v)
    raise ValueError(f"constant {v!r} is not a number")


def const(v: Any) -> Term:
    return term(Op.CONST, (), (v if not isinstance(v, (int, float)) or isinstance(v, bool)
                               else exact_scalar(v),), ())


def _merge(xs: Sequence[Term]) -> tuple[DimSpec, ...]:
    out: dict[str, DimSpec] = {}
    for x in xs:
        for d in x.dims:
            prev = out.setdefault(d.name, d)
            if prev != d:
                raise ValueError(f"operands disagree on dim {d.name}: {prev} vs {d}")
    return tuple(out.values())


def ew(op: Op, *xs: Term, attrs: tuple = ()) -> Term:
    """An elementwise IR node (dims: union of the operands', by name)."""
    return term(op, xs, attrs, _merge(xs))


def einsum(xs: Sequence[Term], out: Sequence[DimSpec]) -> Term:
    """``EINSUM(xs, out)``: product of ``xs`` summed over every dim not in ``out``. ``out`` must
    be dims of the operands (a missing one is dropped: a sum over a dim no operand has is the
    caller's business, see :func:`local_size_term`)."""
    have = {d.name: d for x in xs for d in x.dims}
    keep = tuple(have[d.name] for d in out if d.name in have)
    if len(xs) == 1 and tuple(xs[0].dims) == keep:
        return xs[0]
    return term(Op.EINSUM, tuple(xs), (tuple(d.name for d in keep),), keep)


def local_size_term(d: DimSpec) -> Term:
    """The rank-local size of ``d`` as a scalar term: ``|d| / prod(|axis| for its shards)``."""
    t = term(Op.DIM_SIZE, (), (d.name,), ())
    facs = [t]
    for a in d.shards:
        if a.startswith("#"):
            facs.append(const(Fraction(1, int(a.split("/")[1]))))
        else:
            facs.append(term(Op.POW, (term(Op.AXIS_SIZE, (), (a,), ()),), (Fraction(-1),), ()))
    return facs[0] if len(facs) == 1 else ew(Op.MUL, *facs)
