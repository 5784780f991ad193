"""Lowering rules: index lookups (``embedding``, ``gather``, their backwards) and the integer and
boolean ops that build indices and masks (:mod:`spec_lang.torch_frontend.indexing`).

Laws (``base`` an index input over dim ``V``, ``V[a]`` the rank's block of ``V`` over ``a``):

* ``embedding(W, base) = EINSUM(ONE_HOT(base, V), W)``; with the vocab-parallel masked index
  (``base - r n`` inside the block, 0 outside) and ``W`` the block ``V[a]``, the value is
  ``EINSUM(ONE_HOT(base, V[a]), W)`` on the rows inside the block and row 0 of ``W`` elsewhere
  (a :class:`Masked` value, made whole by ``index_put_(x, [outside], 0)``);
* ``gather(x, d, idx) = EINSUM(x, ONE_HOT(base, x's dim d))`` (same masking);
* ``embedding_dense_backward(g, idx) = EINSUM(ONE_HOT(base, V), g)``; with a masked index, ``g``
  must be 0 outside the block (it is the gradient of the masked output);
* ``lt(base, lo) | ge(base, hi)`` with ``[lo, hi)`` the rank's block: ``1 - sum_v
  ONE_HOT(base, V[a])``; ``ne(base, c)`` with ``c`` outside ``[0, |V|)``: 1;
* ``index_put_(zeros, [arange, idx], v)`` with ``v`` zero outside the block:
  ``v * ONE_HOT(base, V[a])`` (the backward of ``loss_parallel``'s nll).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import torch
import torch.fx as fx

from spec_lang.term import DimSpec, Op, Term, term
from spec_lang.torch_frontend.analysis import Analysis, fresh_layout, shape_of
from spec_lang.torch_frontend.dims import DimsError
from spec_lang.torch_frontend.indexing import (
    Affine01, Arange, Block, Idx, InfMask, Masked, NegInf, Pred, block_of, in_block, one_hot,
)
from spec_lang.torch_frontend.literals import RankValues
from spec_lang.torch_frontend.lower import Lowering
from spec_lang.torch_frontend.registry import rule
from spec_lang.torch_frontend.rules_elementwise import broadcast_dims
from spec_lang.torch_frontend.values import TV, const, einsum, ew

__all__ = ["sub_index", "where_index", "cast_index"]

_ONE = Fraction(1)


def _bcast(n: fx.Node, a: Analysis) -> list:
    return broadcast_dims(n, a, [x for x in n.args if isinstance(x, fx.Node)])


def strip_factor(t: Term, f: Term) -> Term:
    """``t`` without its factor ``f`` when ``t`` is a product with ``f`` as a factor."""
    if t.op is Op.MUL and f in t.args:
        rest = [a for a in t.args if a is not f]
        return rest[0] if len(rest) == 1 else ew(Op.MUL, *rest)
    return t


def _index_placeholder(x: Any) -> Any:
    from spec_lang.torch_frontend.analysis import _index_source
    return _index_source(x)


def _const_of(x: Any) -> Fraction | None:
    """The exact value of a scalar constant argument (python number or constant tensor)."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return Fraction(x)
    if isinstance(x, TV) and x.term.op is Op.CONST and isinstance(x.term.attrs[0], Fraction):
        return x.term.attrs[0]
    return None


def _range(ctx: Lowering, base: Term) -> DimSpec | None:
    """The dim an index input ranges over (its ``INPUT``'s 4th attribute), through shards and
    blocks (a micro-batch: ``RENAME(CHUNK(..))``), which keep the values."""
    b = base
    while b.op in (Op.SHARD, Op.CHUNK, Op.RENAME):
        b = b.args[0]
    if b.op is Op.INPUT and len(b.attrs) > 3:
        return DimSpec(b.attrs[3])
    return None


def _sizes(ctx: Lowering) -> tuple[dict, dict, dict]:
    lit = ctx.traces  # the aligned traces the literals come from
    return lit.axis_sizes, lit.probe_sizes, lit.real_sizes


def _block(ctx: Lowering, n: fx.Node, lo: Any, hi: Any, base: Term) -> Block | None:
    """The rank's block ``[lo, hi)`` of ``base``'s dim, when ``lo``/``hi`` are its bounds."""
    axes, probe, real = _sizes(ctx)
    rng = _range(ctx, base)
    blk = block_of(lo, rng, axes, probe, real)
    if blk is None or not isinstance(hi, RankValues) or hi.affine is None:
        return None
    c0, k = hi.affine
    n_loc = Fraction(probe[rng.name] // axes[blk.axis])
    if hi.axis != blk.axis or c0 != n_loc or k != n_loc:
        return None
    if hi.real is not None and Fraction(hi.real) != Fraction(real[rng.name] // axes[blk.axis]):
        return None
    if hi.real is not None and not hi.real_fits(
            lambda r: (r + 1) * (real[rng.name] // axes[blk.axis])):   # every rank (R32b-4)
        return None
    return blk


# -- comparisons ------------------------------------------------------------------------------
def _compare(op: str) -> type:
    class C:
        __doc__ = f"``{op}(idx, c)``: a range test of an index (see the module docstring)."
        dims = staticmethod(_bcast)

        @staticmethod
        def term(n, ctx, x, c):
            lay = ctx.layout(n)
            if not isinstance(x, Idx):
                raise ctx.fail(n, f"{op} of a float tensor (comparisons of reals are not lowered)")
            bound = ctx.scalar(n, 1, rank=True)
            if x.valid is not None or x.off != 0:
                raise ctx.fail(n, f"{op} of a shifted or masked index")
            if op in ("ne", "eq"):
                v = bound if isinstance(bound, Fraction) else None
                rng = _range(ctx, x.base)
                _, probe, real = _sizes(ctx)
                lit = n.args[1]
                if v is not None and rng is not None and (v < 0 or v >= probe[rng.name]) \
                        and (lit < 0 or lit >= real.get(rng.name, 0)):
                    # an index input is in [0, |V|): it never equals c
                    return Pred(const(_ONE if op == "ne" else Fraction(0)), lay)
                raise ctx.fail(n, f"{op} of an index with {lit!r}, which may be one of its values")
            return Pred(None, lay, (op, x.base, bound))  # type: ignore[arg-type]

    return C


for _op in ("lt", "ge", "ne", "eq"):
    rule(f"aten.{_op}.Scalar")(_compare(_op))


@rule("aten.bitwise_or.Tensor", "aten.logical_or.default")
class BitwiseOr:
    """``lt(base, lo) | ge(base, hi)`` for the rank's block ``[lo, hi)``: the index is outside
    the block, ``1 - sum_v ONE_HOT(base, V[a])``; of two 0/1 masks ``p + q - p q``."""

    dims = staticmethod(_bcast)

    @staticmethod
    def term(n, ctx, p, q):
        lay = ctx.layout(n)
        if isinstance(p, Pred) and isinstance(q, Pred) and p.test and q.test:
            tests = {p.test[0]: p.test, q.test[0]: q.test}
            if set(tests) == {"lt", "ge"} and tests["lt"][1] is tests["ge"][1]:
                base = tests["lt"][1]
                blk = _block(ctx, n, tests["lt"][2], tests["ge"][2], base)
                if blk is None:
                    raise ctx.fail(n, "a range test whose bounds are not the rank's block of a "
                                      "sharded dim")
                inside = in_block(base, blk)
                return Pred(ew(Op.ADD, const(_ONE), ew(Op.NEG, inside)), lay,
                            ("outside", base, blk))
        # each operand named as the output, by position (R31c-1: ``c | c.t()`` of a square
        # mask ``c`` keeps ``c``'s names on ``c.t()``; by name it was ``c | c``)
        a, b = ctx.fit(n, n.args[0], p), ctx.fit(n, n.args[1], q)
        return TV(ew(Op.ADD, a, b, ew(Op.NEG, ew(Op.MUL, a, b))), lay)


@rule("aten.logical_not.default", "aten.bitwise_not.default")
class LogicalNot:
    """``~p = 1 - p`` for a 0/1 mask."""

    dims = staticmethod(_bcast)

    @staticmethod
    def term(n, ctx, p):
        return Pred(ew(Op.ADD, const(_ONE), ew(Op.NEG, p.term)), ctx.layout(n))


# -- integer arithmetic on indices ------------------------------------------------------------
def sub_index(n: fx.Node, ctx: Lowering, x: Any, y: Any) -> Any:
    """``idx - c`` (the rank's block start) and ``(a p + b) - c``."""
    lay = ctx.layout(n)
    if isinstance(x, Affine01):
        c = _const_of(y)
        if c is None:
            raise ctx.fail(n, "a mask minus a non-constant")
        return Affine01(x.pred, x.a, x.b - c, lay)
    if isinstance(x, Idx) and x.valid is None and x.off == 0 and not isinstance(y, TV):
        off = ctx.scalar(n, 1, rank=True)
        return Idx(x.base, lay, off, None, None)
    raise ctx.fail(n, "integer arithmetic on an index other than subtracting a constant")


def where_index(n: fx.Node, ctx: Lowering, c: Any, x: Any, y: Any) -> Any:
    """``where(c, x, y)`` with a constant 0/1 ``c`` (folded), an index ``x``, or
    ``where(mask, 0, -inf)`` (an additive attention mask)."""
    lay = ctx.layout(n)
    if isinstance(y, NegInf) and _const_of(x) == 0 and isinstance(c, Pred):
        return InfMask(ctx.fit(n, n.args[0], c), lay)
    if isinstance(c, Pred) and c.t is not None and c.t.op is Op.CONST:
        pick = x if c.t.attrs[0] != 0 else y
        if isinstance(pick, (int, float)):
            return TV(const(Fraction(pick)), lay)
        return pick.relabel(lay)
    if isinstance(x, Idx):
        fill = _const_of(y)
        if x.valid is not None or fill is None:
            raise ctx.fail(n, "where on a masked index")
        return Idx(x.base, lay, x.off, c.term, fill)
    return None


def cast_index(n: fx.Node, ctx: Lowering, x: Any, dst: Any) -> Any:
    """A mask cast to a float is ``1 * p + 0``; an index cast stays an index."""
    lay = ctx.layout(n)
    if isinstance(x, Pred) and dst is not None and dst.is_floating_point:
        return Affine01(x, _ONE, Fraction(0), lay)
    return x.relabel(lay)


@rule("aten.arange.default", "aten.arange.start")
class ArangeRule:
    """``arange(n)``: the positions of a dim, used as the identity row index of a scatter."""

    @staticmethod
    def dims(n, a):
        return fresh_layout(a.dims, shape_of(n), a.where(n))

    @staticmethod
    def term(n, ctx, *args, **kw):  # noqa: ARG004
        if str(n.target) == "aten.arange.start" and args[0] != 0:
            raise ctx.fail(n, "arange not starting at 0")
        return Arange(ctx.layout(n))


# -- lookups ----------------------------------------------------------------------------------
def _lookup(ctx: Lowering, n: fx.Node, table: TV, tdim: int, idx: Idx, out_lay: tuple,
            extra: list | None = None) -> Any:
    """``sum_v table[..v..] * ONE_HOT(idx, v)`` over torch dim ``tdim`` of ``table``."""
    v = table.dims[tdim]
    if len(v) != 1:
        raise ctx.fail(n, "a lookup along a dim that is a product of named dims")
    v = v[0]
    out = [d for dim in out_lay for d in dim]
    if idx.off == 0 and idx.valid is None:
        if v.shards:
            raise ctx.fail(n, f"a lookup of a whole index in a table sharded over {v.shards}")
        return TV(einsum([one_hot(idx.base, v), table.term] + (extra or []), out), out_lay)
    blk = _masked_block(ctx, n, idx)
    if blk.dim != v:
        raise ctx.fail(n, f"the index is masked to the block {blk.dim} but the table's dim is {v}")
    t = einsum([one_hot(idx.base, v), table.term] + (extra or []), out)
    return Masked(t, out_lay, ew(Op.ADD, const(_ONE), ew(Op.NEG, in_block(idx.base, blk))))


def _masked_block(ctx: Lowering, n: fx.Node, idx: Idx) -> Block:
    """The block a masked index was built for (offset = block start, valid = inside, fill 0)."""
    axes, probe, real = _sizes(ctx)
    blk = block_of(idx.off, _range(ctx, idx.base), axes, probe, real)
    if blk is None or idx.valid is None or idx.fill is None or idx.fill != 0:
        raise ctx.fail(n, "an index that is neither whole nor the rank's masked block")
    if idx.valid is not in_block(idx.base, blk):
        raise ctx.fail(n, "an index masked by something other than its block")
    return blk


@rule("aten.embedding.default")
class Embedding:
    """``embedding(W, idx)[..., h] = W[idx[...], h] = EINSUM(ONE_HOT(idx, V), W)``."""

    @staticmethod
    def dims(n, a):
        w, idx = n.args[:2]
        lw, li = a.layouts[w], a.layouts[idx]
        a.marks[("table", idx)] = list(lw[0])
        if isinstance(idx, fx.Node) and str(idx.target).startswith("aten.arange"):
            # positions 0..n-1 of the whole table (learned position embeddings)
            a.same(li[0], lw[0], n)
            return [list(lw[0]), list(lw[1])]
        a.index_of(idx, lw[0], n)
        return [list(d) for d in li] + [list(lw[1])]

    @staticmethod
    def term(n, ctx, w, idx, *args):  # noqa: ARG004
        if isinstance(idx, Arange):
            return TV(w.term, ctx.layout(n))      # W[0..n-1] with n = |W| rows: W
        if not isinstance(idx, Idx):
            raise ctx.fail(n, "an embedding lookup with an index that is not an input")
        return _lookup(ctx, n, w, 0, idx, ctx.layout(n))


@rule("aten.embedding_dense_backward.default")
class EmbeddingBackward:
    """``embedding_dense_backward(g, idx, V)[v, h] = sum_{b,s} [idx == v] g[b, s, h]``; with a
    masked index, ``g`` must be 0 outside the block (else the rows outside would add into row
    0)."""

    @staticmethod
    def dims(n, a):
        g, idx, num = n.args[:3]
        table = a.marks.get(("table", idx))
        lg = a.layouts[g]
        for p, q in zip(lg[:-1], a.layouts[idx]):    # g is (*idx.shape, H)
            a.same(p, q, n)
        if table is not None and a.dims.canon(table) and \
                a.dims.find(a.dims.canon(table)[0]).size == num:
            return [list(table), list(lg[-1])]
        # the index's dim as a whole (DTensor computes a sharded table's gradient whole)
        src = _index_placeholder(idx)
        rng = a.index_range.get(src) if src is not None else None
        if rng is None:
            raise DimsError(f"{a.where(n)}: embedding backward of an index no embedding used")
        r = a.dims.find(rng)
        if r.size == num:
            return [[r], list(lg[-1])]
        if r.info is not None:
            k = 1
            for sh in r.info[1]:
                k *= a.dims.axis_sizes.get(sh, 1)
            if r.size * k == num:
                return [[a.dims.fresh(num, a.where(n), (r.info[0], ()))], list(lg[-1])]
        raise DimsError(f"{a.where(n)}: embedding backward over {num} rows, the table has "
                        f"{r.size}")

    @staticmethod
    def term(n, ctx, g, idx, num, padding_idx=-1, scale=False):  # noqa: ARG004
        if padding_idx not in (-1, None) or scale:
            raise ctx.fail(n, "an embedding with padding_idx or scale_grad_by_freq")
        out_lay = ctx.layout(n)
        v = out_lay[0][0]
        out = [d for dim in out_lay for d in dim]
        if isinstance(idx, Arange):              # positions: row v gets the gradient at v
            return TV(einsum([ctx.fit(n, n.args[0], g, None)], out), out_lay) \
                if False else TV(einsum([g.term], out), out_lay)
        if idx.off == 0 and idx.valid is None:
            return TV(einsum([one_hot(idx.base, v), g.term], out), out_lay)
        blk = _masked_block(ctx, n, idx)
        zero = ctx.zero_where.get(id(g.term))
        outside = ew(Op.ADD, const(_ONE), ew(Op.NEG, in_block(idx.base, blk)))
        if zero is not outside:
            raise ctx.fail(n, "the gradient of a masked lookup is not zero outside the block")
        # g = x * inside (zeroed outside the block); the one-hot is 0 outside: drop the factor
        gt = strip_factor(g.term, in_block(idx.base, blk))
        return TV(einsum([one_hot(idx.base, blk.dim), gt], out), out_lay)


@rule("aten.gather.default")
class Gather:
    """``gather(x, d, idx)[..., 0] = x[..., idx[..., 0]] = EINSUM(x, ONE_HOT(idx, x's dim d))``."""

    @staticmethod
    def dims(n, a):
        x, d, idx = n.args[:3]
        lx, li = a.layouts[x], a.layouts[idx]
        d = d + len(lx) if d < 0 else d
        for k, (p, q) in enumerate(zip(lx, li)):
            if k != d and q:
                a.same(p, q, n)
        a.index_of(idx, lx[d], n)
        return [list(q) for q in li]

    @staticmethod
    def term(n, ctx, x, d, idx, *args, **kw):  # noqa: ARG004
        if not isinstance(idx, Idx):
            raise ctx.fail(n, "gather with an index that is not an input")
        d = d + len(x.dims) if d < 0 else d
        if ctx.layout(n)[d]:
            raise ctx.fail(n, "gather of more than one entry per row")
        return _lookup(ctx, n, x, d, idx, ctx.layout(n))


@rule("aten.index_put_.default", "aten.index_put.default")
class IndexPut:
    """``x[mask] = c`` and ``x[arange, idx] = v`` (see the module docstring): ``x * (1 - mask)
    + c * mask``; a masked index or a :class:`Masked` value is made whole when ``mask`` is
    exactly its outside."""

    @staticmethod
    def dims(n, a):
        x, inds = n.args[:2]
        lx = [list(d) for d in a.layouts[x]]
        if len(inds) == 1 and isinstance(inds[0], fx.Node) \
                and inds[0].meta["val"].dtype == torch.bool:
            # x[mask]: the mask has x's dims (leading ones)
            for p, q in zip(lx, a.layouts[inds[0]]):
                if q:
                    a.same(p, q, n)
        if len(inds) == 2 and all(isinstance(i, fx.Node) for i in inds):
            r, idx = inds
            a.same(lx[0], a.layouts[r][0], n)
            a.same(lx[0], a.layouts[idx][0], n) if a.layouts[idx] and a.layouts[idx][0] else None
            a.index_of(idx, lx[1], n)
        return lx

    @staticmethod
    def term(n, ctx, x, inds, v, accumulate=False):  # noqa: C901, PLR0911
        lay = ctx.layout(n)
        if accumulate:
            raise ctx.fail(n, "index_put_ with accumulate=True")
        if len(inds) == 1 and isinstance(inds[0], Pred):
            p = inds[0]
            c = _const_of(v)
            if isinstance(x, Idx) and p.test and p.test[0] == "outside" and p.test[1] is x.base:
                blk = p.test[2]
                if x.valid is not None or c is None:
                    raise ctx.fail(n, "index_put_ on a masked index")
                if block_of(x.off, _range(ctx, x.base), *_sizes(ctx)) != blk:
                    raise ctx.fail(n, "the mask's block is not the index's offset block")
                return Idx(x.base, lay, x.off, in_block(x.base, blk), c)
            if isinstance(x, Masked):
                if c != 0 or p.t is not x.garbage:
                    raise ctx.fail(n, "index_put_ that does not clear exactly the masked rows")
                ctx.zero_where[id(x.t)] = p.t
                return TV(x.t, lay)
            if isinstance(x, TV) and c is not None:
                if p.test and p.test[0] == "outside":
                    keep = in_block(p.test[1], p.test[2])   # 1 - outside, as one factor
                else:
                    keep = ew(Op.ADD, const(_ONE), ew(Op.NEG, p.t))
                t = ew(Op.MUL, x.term, keep)
                if c != 0:
                    t = ew(Op.ADD, t, ew(Op.MUL, const(c), p.t))
                else:
                    ctx.zero_where[id(t)] = p.t
                return TV(t, lay)
        if len(inds) == 2 and isinstance(inds[0], Arange) and isinstance(inds[1], Idx) \
                and isinstance(x, TV) and x.term.op is Op.CONST and x.term.attrs[0] == 0:
            idx = inds[1]
            vt = v.term if not isinstance(v, (int, float)) else const(Fraction(v))
            if idx.off == 0 and idx.valid is None:
                oh = one_hot(idx.base, lay[1][0])
                return TV(ew(Op.MUL, vt, oh), lay)
            blk = _masked_block(ctx, n, idx)
            zero = v.zero_where() if isinstance(v, Affine01) else None
            outside = ew(Op.ADD, const(_ONE), ew(Op.NEG, in_block(idx.base, blk)))
            if zero is not outside:
                raise ctx.fail(n, "a scatter into a masked block of values that are not zero "
                                  "outside the block")
            if lay[1][0] != blk.dim:
                raise ctx.fail(n, "a scatter into a dim other than the index's block")
            # v is zero outside the block; inside, where the one-hot can be 1, it is
            # a * [outside = 0] + b = b
            inside = const(v.b) if v.pred.test and v.pred.test[0] == "outside" else vt
            return TV(ew(Op.MUL, inside, one_hot(idx.base, blk.dim)), lay)
        raise ctx.fail(n, "an index_put_ pattern that is not lowered")


_ = (term, Term)


@rule("aten.tril.default")
class Tril:
    """``tril(ones(n, n)) = CAUSAL_MASK(q, k)`` (``[k <= q]``) of a constant-1 mask; other
    ``tril`` s are UNKNOWN."""

    dims = staticmethod(lambda n, a: [list(d) for d in a.layouts[n.args[0]]])

    @staticmethod
    def term(n, ctx, x, diagonal=0):
        lay = ctx.layout(n)
        if diagonal != 0 or len(lay) != 2 or any(len(d) != 1 for d in lay):
            raise ctx.fail(n, "tril other than the causal mask of a square matrix")
        if not (isinstance(x, Pred) and x.t is not None and x.t.op is Op.CONST
                and x.t.attrs[0] == 1):
            raise ctx.fail(n, "tril of a tensor that is not all ones")
        q, k = lay[0][0], lay[1][0]
        if q.shards or k.shards:
            raise ctx.fail(n, "a causal mask over sharded positions (context parallelism)")
        return Pred(term(Op.CAUSAL_MASK, (), (q.name, k.name), (q, k)), lay)
