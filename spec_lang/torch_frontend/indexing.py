"""Integer and boolean tensors: indices into a named dim, and the masks built from them.

The IR has no integer arithmetic; an index is only ever *looked up* (``ONE_HOT(idx, V)``,
contracted with a table). So integer and boolean tensors are kept symbolic while the graph
computes with them, and each lookup becomes a one-hot contraction (``FRONTEND.md``, design 4:
rank-dependent literals recognised by pattern):

* :class:`Idx`: ``base - off`` where the 0/1 ``valid`` is 1 and ``fill`` elsewhere; ``base`` is
  an index input (tokens, labels) over the dim ``rng``. DTensor's vocab-parallel embedding and
  ``loss_parallel`` subtract the rank's block start (a :class:`RankValues` offset ``r * n``)
  and overwrite the out-of-block entries with 0;
* :class:`Pred`: a 0/1 tensor as an IR term, with what it tests when it is a range test of an
  index (``lt(idx, lo) | ge(idx, hi)``: the index is *outside* ``[lo, hi)``);
* :class:`Affine01`: ``a * pred + b``, a float made from a mask (``mask.float() - 1``);
* :class:`Masked`: a float tensor whose value is known only where ``garbage`` is 0 (a masked
  lookup reads row ``fill`` on the other rows); only an ``index_put_`` of 0 on exactly those
  rows makes it a plain value again.

A block ``[r n, (r+1) n)`` is recognised as rank ``r``'s shard of the index's dim ``V`` over
axis ``a`` when ``n = |V| / |a|`` at probe and real sizes and the offsets are affine in the
rank's coordinate on the traced coordinates (an assumption of the pattern, stated with every
verdict that uses it); then "inside the block" is ``sum_v ONE_HOT(base, V[a])``.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from spec_lang.term import DimSpec, Op, Term, term
from spec_lang.torch_frontend.literals import RankValues
from spec_lang.torch_frontend.values import const, einsum, ew

__all__ = ["NotANumber", "Idx", "Pred", "Affine01", "Masked", "Arange", "Block", "one_hot",
           "in_block", "block_of"]


class NotANumber(Exception):  # noqa: N818
    """An index or a partly undefined value reached an op that needs a number."""


@dataclass(frozen=True)
class Block:
    """Rank ``r``'s block of dim ``dim`` (a DimSpec with its shards, the last being ``axis``)."""

    dim: DimSpec
    axis: str


@dataclass(frozen=True)
class Idx:
    """``base - off`` where ``valid`` (None: everywhere), else ``fill``; layout ``dims``."""

    base: Term
    dims: tuple
    off: Any = Fraction(0)        # Fraction or a Block (the block start of a sharded dim)
    valid: Term | None = None     # 0/1, same dims as base
    fill: Fraction | None = None

    @property
    def term(self) -> Term:
        raise NotANumber("an integer index tensor is used as a number")

    def relabel(self, dims: tuple) -> Idx:
        return Idx(self.base, dims, self.off, self.valid, self.fill)


@dataclass(frozen=True)
class Pred:
    """A 0/1 tensor: its IR ``term`` and, for range tests of an index, ``test`` =
    ``("lt", base, bound)``, ``("ge", base, bound)`` or ``("outside", base, Block)``."""

    t: Term
    dims: tuple
    test: tuple | None = None

    @property
    def term(self) -> Term:
        if self.t is None:
            raise NotANumber("a comparison of an index is used as a mask before it is known "
                             "what it tests")
        return self.t

    def relabel(self, dims: tuple) -> Pred:
        return Pred(self.t, dims, self.test)


@dataclass(frozen=True)
class Affine01:
    """``a * pred + b`` for a 0/1 ``pred`` (a mask cast to float, then shifted or scaled)."""

    pred: Pred
    a: Fraction
    b: Fraction
    dims: tuple

    @property
    def term(self) -> Term:
        t = self.pred.t
        if self.a != 1:
            t = ew(Op.MUL, const(self.a), t)
        return t if self.b == 0 else ew(Op.ADD, t, const(self.b))

    def relabel(self, dims: tuple) -> Affine01:
        return Affine01(self.pred, self.a, self.b, dims)

    def zero_where(self) -> Term | None:
        """The mask on which the value is 0, when it is ``pred`` or ``1 - pred``."""
        if self.a + self.b == 0:
            return self.pred.t          # a * (pred - 1): zero where pred is 1
        if self.b == 0:
            return ew(Op.ADD, const(Fraction(1)), ew(Op.NEG, self.pred.t))
        return None


@dataclass(frozen=True)
class Masked:
    """A float tensor equal to ``value.term`` where ``garbage`` is 0; undefined elsewhere (the
    term is 0 there). ``dims``: the layout."""

    t: Term
    dims: tuple
    garbage: Term

    @property
    def term(self) -> Term:
        raise NotANumber("a value read through a masked lookup is used before its masked rows "
                         "are overwritten")

    def relabel(self, dims: tuple) -> Masked:
        return Masked(self.t, dims, self.garbage)


@dataclass(frozen=True)
class Arange:
    """``arange(n)``: the identity index along a dim (the row index of a scatter)."""

    dims: tuple

    @property
    def term(self) -> Term:
        raise NotANumber("arange is used as a number")

    def relabel(self, dims: tuple) -> Arange:
        return Arange(dims)


@dataclass(frozen=True)
class NegInf:
    """The scalar ``-inf`` (only an additive attention mask may use it)."""

    dims: tuple = ()

    @property
    def term(self) -> Term:
        raise NotANumber("-inf is used as a number (the IR is over the reals)")

    def relabel(self, dims: tuple) -> NegInf:
        return NegInf(dims)


@dataclass(frozen=True)
class InfMask:
    """``where(mask, 0, -inf)``: an additive mask, 0 where the 0/1 ``mask`` is 1."""

    mask: Term
    dims: tuple

    @property
    def term(self) -> Term:
        raise NotANumber("an additive -inf mask is used other than added to scores")

    def relabel(self, dims: tuple) -> InfMask:
        return InfMask(self.mask, dims)


@dataclass(frozen=True)
class MaskedLogits:
    """``t + where(mask, 0, -inf)``: scores whose masked entries are -inf (only a softmax reads
    them: ``exp(-inf) = 0``)."""

    t: Term
    mask: Term
    dims: tuple

    @property
    def term(self) -> Term:
        raise NotANumber("scores with -inf entries are used other than by a softmax")

    def relabel(self, dims: tuple) -> MaskedLogits:
        return MaskedLogits(self.t, self.mask, dims)


def one_hot(base: Term, v: DimSpec) -> Term:
    """``ONE_HOT(base, v)``: dims ``base.dims + (v,)`` (a sharded ``v``: the rank's block)."""
    return term(Op.ONE_HOT, (base,), (v.name,), tuple(base.dims) + (v,))


def in_block(base: Term, blk: Block) -> Term:
    """1 where ``base`` falls in the rank's block of ``blk.dim``: ``sum_v ONE_HOT(base, V[a])``."""
    return einsum([one_hot(base, blk.dim)], tuple(base.dims))


def block_of(off: Any, rng: DimSpec | None, axis_sizes: dict[str, int], sizes: dict[str, int],
             real_sizes: dict[str, int]) -> Block | None:
    """The block ``off`` starts, when ``off`` is a :class:`RankValues` ``r * n`` with ``n`` the
    local size of ``rng`` over ``off.axis`` (at probe and at real sizes)."""
    if not isinstance(off, RankValues) or rng is None or off.affine is None:
        return None
    c0, k = off.affine
    ax = off.axis
    if c0 != 0 or ax not in axis_sizes:
        return None
    n = axis_sizes[ax]
    probe = sizes.get(rng.name)
    if probe is None or probe % n or Fraction(probe // n) != k:
        return None
    if off.real is not None:
        real = real_sizes.get(rng.name)
        if real is None or real % n or Fraction(off.real) != Fraction(0):
            return None
        # every rank's offset at real sizes, not only the main rank's (round 32b, R32b-4)
        if not off.real_fits(lambda r: r * (real // n)):
            return None
    return Block(DimSpec(rng.name, rng.shards + (ax,)), ax)
