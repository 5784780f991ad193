"""Lowering rules: layout ops (views, transposes, expand) and block ops (slice, split, cat).

With named dims a view is a relabelling: its value is the same term and only the layout (which
named dims each torch dim is the product of) changes; :meth:`Dims.regroup` finds it, splitting
atoms where a new dim boundary falls inside one (heads out of a projection's output dim).

Block ops cut one named dim into equal blocks: block ``i`` of ``n`` of dim ``A`` is
``RENAME(CHUNK(x, A, n, i), A, A_i)`` where ``A_i`` is a dim of its own (the IR's ``CHUNK``
keeps the name ``A`` and tags the block; the rename lets two blocks meet in one elementwise op,
as the halves of rotary embeddings do). ``cat`` of equal blocks along a new dim ``Q`` is
``CONCAT(RENAME(b_i, B_i, Q, block=(i, n)) ...)``.
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction
from typing import Any

import torch.fx as fx

from spec_lang.term import DimSpec, Op, term
from spec_lang.torch_frontend.analysis import Analysis, shape_of
from spec_lang.torch_frontend.buckets import cat_dims, cat_term, slice_dims, split_dims
from spec_lang.torch_frontend.dims import DimsError
from spec_lang.torch_frontend.indexing import Idx
from spec_lang.torch_frontend.lower import Lowering
from spec_lang.torch_frontend.registry import rule
from spec_lang.torch_frontend.rules_collectives import (
    ChunkStack, RankStack, broadcast_piece, gather_of_pieces,
)
from spec_lang.torch_frontend.values import TV, Pieces, Stacked

__all__ = ["block_dims", "block_term"]


def _norm(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


def _view_dims(n: fx.Node, a: Analysis) -> list:
    src = a.layouts[n.args[0]]
    flat = [x for dim in src for x in dim]
    return [list(g) for g in a.dims.regroup(flat, shape_of(n), a.where(n))]


def _same_term(n: fx.Node, ctx: Lowering, x: Any, *args: Any, **kw: Any) -> Any:  # noqa: ARG001
    return x.relabel(ctx.layout(n))


def _relabel(doc: str, dims: Any) -> type:
    class V:
        __doc__ = doc
        term = staticmethod(_same_term)

    V.dims = staticmethod(dims)
    return V


rule("aten.view.default", "aten._unsafe_view.default")(_relabel(
         "``view(x, shape)``: the same values, dims regrouped row-major (a relabelling).",
         _view_dims))


@rule("aten._reshape_alias.default")
class ReshapeAlias:
    """``_reshape_alias(x, shape, stride)`` is ``view(x, shape)`` when ``x`` is contiguous and
    ``stride`` is the row-major stride of ``shape``; any other stride reads ``x``'s storage in
    another order (adversarial round 26: a column-major stride was lowered as the identity)."""

    dims = staticmethod(_view_dims)

    @staticmethod
    def term(n, ctx, x, *args, **kw):  # noqa: ARG004
        # the stride argument itself (the fake tensor's stride is the row-major one whatever
        # the argument says)
        src, shape, stride = n.args[0].meta["val"], list(n.args[1]), list(n.args[2])
        want, acc = [], 1
        for sz in reversed(shape):
            want.append(acc)
            acc *= int(sz)
        want.reverse()
        if not src.is_contiguous() or len(stride) != len(shape) or any(
                int(sz) != 1 and int(st) != w for sz, st, w in zip(shape, stride, want)):
            raise ctx.fail(n, f"_reshape_alias with strides {tuple(stride)} that are not "
                              f"the row-major strides {tuple(want)} of a contiguous tensor")
        return x.relabel(ctx.layout(n))


def _identity_dims(n: fx.Node, a: Analysis) -> list:
    return [list(d) for d in a.layouts[n.args[0]]]


rule("aten.detach.default", "aten.alias.default")(_relabel(
    "``detach(x) = x`` (no gradient flows, the value is the same).", _identity_dims))


def _t_dims(n: fx.Node, a: Analysis) -> list:
    src = a.layouts[n.args[0]]
    return [list(d) for d in reversed(src)] if len(src) == 2 else [list(d) for d in src]


rule("aten.t.default")(_relabel("``t(x)``: transpose of a matrix (named dims: a relabelling).",
                                _t_dims))


def _transpose_dims(n: fx.Node, a: Analysis) -> list:
    src = [list(d) for d in a.layouts[n.args[0]]]
    i, j = (_norm(k, len(src)) for k in n.args[1:3])
    src[i], src[j] = src[j], src[i]
    return src


rule("aten.transpose.int")(_relabel("``transpose(x, i, j)`` (a relabelling).", _transpose_dims))


def _permute_dims(n: fx.Node, a: Analysis) -> list:
    src = a.layouts[n.args[0]]
    return [list(src[_norm(k, len(src))]) for k in n.args[1]]


rule("aten.permute.default")(_relabel("``permute(x, order)`` (a relabelling).", _permute_dims))


def _unsqueeze_dims(n: fx.Node, a: Analysis) -> list:
    src = [list(d) for d in a.layouts[n.args[0]]]
    k = n.args[1]
    k = k + len(src) + 1 if k < 0 else k
    return src[:k] + [[]] + src[k:]


rule("aten.unsqueeze.default")(_relabel("``unsqueeze(x, k)``: a new dim of size 1.",
                                        _unsqueeze_dims))


def _squeeze_dims(n: fx.Node, a: Analysis) -> list:
    src = a.layouts[n.args[0]]
    shape = shape_of(n.args[0])
    name = str(n.target)
    if name == "aten.squeeze.default":
        drop = {i for i, s in enumerate(shape) if s == 1}
    elif name == "aten.squeeze.dim":
        drop = {_norm(n.args[1], len(shape))} & {i for i, s in enumerate(shape) if s == 1}
    else:
        drop = {_norm(k, len(shape)) for k in n.args[1]} & {i for i, s in enumerate(shape)
                                                              if s == 1}
    return [list(d) for i, d in enumerate(src) if i not in drop]


rule("aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default")(_relabel(
    "``squeeze(x, k)``: drops size-1 dims.", _squeeze_dims))


def _expand_dims(n: fx.Node, a: Analysis) -> list:
    src = a.layouts[n.args[0]]
    sx = shape_of(n.args[0])
    out = shape_of(n)
    off = len(out) - len(sx)
    lay = []
    for i, s in enumerate(out):
        j = i - off
        if j >= 0 and sx[j] == s:
            lay.append(list(src[j]))
        else:
            lay.append([] if s == 1 else [a.dims.fresh(s, a.where(n))])
    return lay


rule("aten.expand.default")(_relabel(
    "``expand(x, shape)``: broadcast along new dims (the term is constant along them).",
    _expand_dims))


# -- blocks -------------------------------------------------------------------------------------
def block_dims(a: Analysis, n: fx.Node, src: list, dim: int, parts: int, index: int,
               where: str) -> list:
    """Layout of block ``index`` of ``parts`` equal blocks of torch dim ``dim`` of ``src``: its
    outermost atom is cut (the rest of the dim is whole in every block)."""
    lay = [list(d) for d in src]
    atoms = a.dims.canon(lay[dim])
    if not atoms:
        raise DimsError(f"{where}: a block of a size-1 dim")
    first = a.dims.find(atoms[0])
    if first.size % parts:
        raise DimsError(f"{where}: {parts} blocks of a dim whose outermost named dim has size "
                        f"{first.size}")
    piece = a.dims.fresh(first.size // parts, where)
    piece.piece = (first, index, parts)
    lay[dim] = [piece] + atoms[1:]
    return lay


def block_term(ctx: Lowering, n: fx.Node, x: Any, dim: int, parts: int, index: int,
               out_layout: tuple) -> Any:
    """``RENAME(CHUNK(x, A, parts, index), A, A_i)`` for the outermost dim ``A`` of torch dim
    ``dim``, ``A_i`` = the block's own dim (from the layout). An index tensor (:class:`Idx`:
    a pipeline schedule's micro-batch of the token ids or labels) is blocked in its base and
    its validity mask; an offset that is a shard's block start is not blocked (UNKNOWN)."""
    if isinstance(x, Idx):
        if not isinstance(x.off, Fraction):
            raise ctx.fail(n, "a block of an index tensor with a rank-dependent offset")
        base = block_term(ctx, n, TV(x.base, x.dims), dim, parts, index, out_layout).term
        valid = None if x.valid is None else block_term(
            ctx, n, TV(x.valid, x.dims), dim, parts, index, out_layout).term
        return Idx(base, out_layout, x.off, valid, x.fill)
    a_spec = x.dims[dim][0]
    new = out_layout[dim][0]
    if a_spec.name not in x.term.dim_names:   # broadcast along A: every block is the same
        return TV(x.term, out_layout)
    cur = x.term.dim(a_spec.name)
    chunk_spec = DimSpec(cur.name, cur.shards + (f"#{index}/{parts}",))
    ch = term(Op.CHUNK, (x.term,), (cur.name, parts, index),
              tuple(chunk_spec if d.name == cur.name else d for d in x.term.dims))
    if new.name == cur.name:
        return TV(ch, out_layout)
    rn = term(Op.RENAME, (ch,), (cur.name, new.name),
              tuple(new if d.name == cur.name else d for d in ch.dims))
    return TV(rn, out_layout)


@rule("aten.slice.Tensor")
class Slice:
    """``slice(x, d, start, end)``: the whole dim (identity), or block ``i`` of ``n`` equal
    blocks (``start = i*|d|/n``, ``end = start + |d|/n``, step 1); anything else is UNKNOWN."""

    @staticmethod
    def dims(n, a):
        lay = slice_dims(n, a)          # a piece of a flat bucket (buckets)
        if lay is not None:
            return lay
        src = a.layouts[n.args[0]]
        shape = shape_of(n.args[0])
        d = _norm(n.args[1] if len(n.args) > 1 else 0, len(shape))
        full, parts, index = _slice_block(n, shape[d])
        if full:
            return [list(x) for x in src]
        if parts is None:
            raise DimsError(f"{a.where(n)}: a slice that is not an equal block")
        return block_dims(a, n, src, d, parts, index, a.where(n))

    @staticmethod
    def term(n, ctx, x, *args):  # noqa: ARG004
        if ctx.analysis.marks.get(n, ("",))[0] == "bucketslice" or \
                n.meta.get("bucket_piece") is not None:    # (a bucket: lower.py)
            raise ctx.fail(n, "a slice of a flat bucket whose value is no bucket")
        shape = shape_of(n.args[0])
        d = _norm(n.args[1] if len(n.args) > 1 else 0, len(shape))
        full, parts, index = _slice_block(n, shape[d])
        if full:
            return x.relabel(ctx.layout(n)) if isinstance(x, Idx) else TV(x.term, ctx.layout(n))
        return block_term(ctx, n, x, d, parts, index, ctx.layout(n))


def _slice_block(n: fx.Node, size: int) -> tuple[bool, int | None, int | None]:
    start = n.args[2] if len(n.args) > 2 and n.args[2] is not None else 0
    end = n.args[3] if len(n.args) > 3 and n.args[3] is not None else size
    step = n.args[4] if len(n.args) > 4 else 1
    start = max(0, start + size if start < 0 else start)
    end = min(size, end + size if end < 0 else end)
    if step != 1:
        return False, None, None
    if start == 0 and end >= size:
        return True, None, None
    w = end - start
    if w <= 0 or size % w or start % w:
        return False, None, None
    return False, size // w, start // w


@rule("aten.split.Tensor")
class Split:
    """``split(x, s, d)`` (also what ``chunk`` becomes): the blocks of ``d`` (equal sizes
    only)."""

    @staticmethod
    def dims(n, a):
        lay = split_dims(n, a)          # a flat bucket's pieces of m entries each (R36b-5)
        if lay is not None:
            return lay
        src = a.layouts[n.args[0]]
        shape = shape_of(n.args[0])
        d = _norm(n.args[2] if len(n.args) > 2 else 0, len(shape))
        outs = n.meta["val"]
        if any(o.shape[d] != outs[0].shape[d] for o in outs):
            raise DimsError(f"{a.where(n)}: split into unequal blocks")
        parts = len(outs)
        if parts == 1:
            return [[list(x) for x in src]]
        atoms = a.dims.canon(src[d])
        first = a.dims.find(atoms[0]) if atoms else None
        if first is not None and first.rank_axis is not None and parts == first.size:
            # the ranks' values stacked by an all-gather: piece i is rank i's value
            rest = [list(x) for x in src]
            rest[d] = atoms[1:]
            for i in range(parts):
                a.marks[(n, i)] = ("rankpiece", first.rank_axis, i)
            return [[list(x) for x in rest] for _ in range(parts)]
        return [block_dims(a, n, src, d, parts, i, a.where(n)) for i in range(parts)]

    @staticmethod
    def term(n, ctx, x, *args):  # noqa: ARG004
        if ctx.analysis.marks.get(n, ("",))[0] == "bucketsplit":    # (a bucket: buckets.py)
            raise ctx.fail(n, "a split of a flat bucket whose value is no bucket")
        shape = shape_of(n.args[0])
        d = _norm(n.args[2] if len(n.args) > 2 else 0, len(shape))
        parts = len(n.meta["val"])
        if parts == 1:
            return Pieces((x.relabel(ctx.layout(n, 0)) if isinstance(x, Idx)
                           else TV(x.term, ctx.layout(n, 0)),))
        if isinstance(x, RankStack):
            return Pieces(tuple(broadcast_piece(x, i, ctx.layout(n, i)) for i in range(parts)))
        return Pieces(tuple(block_term(ctx, n, x, d, parts, i, ctx.layout(n, i))
                            for i in range(parts)), x, d)


@rule("aten.cat.default")
class Cat:
    """``cat(xs, d)``: equal blocks along one named dim ``Q`` (``CONCAT`` of the blocks renamed
    ``B_i -> Q`` as block ``i``); a block that is block ``i`` of ``Q`` already (the inverse of a
    split) is used as it is. 1-d tensors that are no blocks of one named dim: a flat bucket
    (:mod:`~spec_lang.torch_frontend.buckets`)."""

    @staticmethod
    def dims(n, a):
        xs = n.args[0]
        shape = shape_of(n)
        d = _norm(n.args[1] if len(n.args) > 1 else 0, len(shape))
        lays = [a.layouts[x] for x in xs]
        split = _split_source(xs)
        if split is not None:
            sp, idx = split
            mark = a.marks.get((sp, 0))
            if mark is not None and mark[0] == "rankpiece" and idx == list(range(len(xs))):
                # rank i's value as block i along d: the all-gather along d
                ax = mark[1]
                out = [list(x) for x in lays[0]]
                atoms = a.dims.canon(out[d])
                out[d] = [a.dims.gathered(atoms[0], ax, a.where(n))] + atoms[1:]
                return out
            k = _norm(sp.args[2] if len(sp.args) > 2 else 0, len(shape_of(sp.args[0])))
            if mark is None and k != d and idx == list(range(len(xs))):
                # the blocks of y along k stacked along d: the input of a reduce-scatter
                out = [list(x) for x in lays[0]]
                st = a.dims.fresh(len(xs), a.where(n))
                out[d] = [st] + a.dims.canon(out[d])
                a.marks[n] = ("chunkstack", sp.args[0], k, len(xs))
                return out
        sizes = {shape_of(x)[d] for x in xs}
        if len(sizes) != 1 or any(len(a.dims.canon(l[d])) != 1 for l in lays):
            bucket = cat_dims(n, a, lays, d)      # 1-d pieces of no one named dim
            if bucket is not None:
                return bucket
        if len(sizes) != 1:
            raise DimsError(f"{a.where(n)}: cat of blocks of unequal sizes {sorted(sizes)}")
        out = broadcast_like(a, n, lays, d)
        blocks = [a.dims.canon(l[d]) for l in lays]
        if any(len(b) != 1 for b in blocks):
            raise DimsError(f"{a.where(n)}: cat along a dim that is a product of named dims")
        q = a.dims.fresh(shape[d], a.where(n))
        # blocks i of one dim, in order: the cat is that dim again
        srcs = [_piece_of(a, l[d]) for l in lays]
        if all(s is not None for s in srcs) and len({id(a.dims.find(s[0])) for s in srcs}) == 1 \
                and [s[1] for s in srcs] == list(range(len(xs))) \
                and all(s[2] == len(xs) for s in srcs):
            a.dims.unify(q, srcs[0][0], a.where(n))
        out[d] = [q]
        return out

    @staticmethod
    def term(n, ctx, xs, dim=0):  # noqa: ARG004
        shape = shape_of(n)
        d = _norm(n.args[1] if len(n.args) > 1 else 0, len(shape))
        mark = ctx.analysis.marks.get(n)
        if mark is not None and mark[0] == "bucket":
            return cat_term(n, ctx, list(xs))
        g = gather_of_pieces(ctx, n, list(xs), d)
        if g is not None:
            return g
        if mark is not None and mark[0] == "chunkstack":
            return ChunkStack(ctx.env[mark[1]], mark[2], mark[3])
        out = ctx.layout(n)
        q = out[d][0]
        k = len(xs)
        blocks = []
        for i, x in enumerate(xs):
            b = x.dims[d][0]
            t = x.term
            if b.name not in t.dim_names:
                raise ctx.fail(n, "cat of a block that is constant along the cat dim")
            cur = t.dim(b.name)
            want = DimSpec(q.name, q.shards + (f"#{i}/{k}",))
            if cur != want:
                t = term(Op.RENAME, (t,), (b.name, q.name),
                         tuple(want if dd.name == b.name else dd for dd in t.dims))
            blocks.append(t)
        dims: dict[str, DimSpec] = {}
        for t in blocks:
            for dd in t.dims:
                if dd.name == q.name:
                    dims.setdefault(q.name, q)
                elif dims.setdefault(dd.name, dd) != dd:
                    raise ctx.fail(n, f"cat of blocks that disagree on dim {dd.name}")
        return TV(term(Op.CONCAT, tuple(blocks), (q.name,), tuple(dims.values())), out)


@rule("aten.cat.out")
class CatOut:
    """``cat(xs, d, out=buf)``: ``cat(xs, d)`` written into all of ``buf`` (``lower``'s
    ``OUT_WRITES``: the result is ``buf``), when ``buf`` has the cat's shape and dtype at the
    probe and at the real sizes (torch resizes a ``buf`` of another shape and casts to another
    dtype: UNKNOWN). Only a cat that is a flat bucket (a preallocated gradient buffer, R35b-3):
    the bucket is written into ``buf``'s aliases as it is (``buckets.written_value``), where a
    tensor of named dims would be read with ``buf``'s own (fresh) named dims."""

    @staticmethod
    def dims(n, a):
        if not _out_fits(n):
            raise DimsError(f"{a.where(n)}: cat into an out= tensor of another shape or dtype")
        lay = Cat.dims(n, a)
        if a.marks.get(n, ("",))[0] != "bucket":   # a TV written into ``out`` would keep out's
            raise DimsError(f"{a.where(n)}: cat(out=) of no flat bucket")   # own named dims
        return lay

    @staticmethod
    def term(n, ctx, xs, dim=0):
        tr = ctx.traces
        if tr is not None and tr.real is not None and (tr.twin(n) is None
                                                       or not _out_fits(tr.twin(n))):
            raise ctx.fail(n, "cat into an out= tensor of another shape or dtype at the real "
                              "sizes")
        return Cat.term(n, ctx, xs, dim)


def _out_fits(n: fx.Node) -> bool:
    """``out=`` of ``n`` is a tensor of ``n``'s shape and of its inputs' dtype."""
    out, xs = n.kwargs.get("out"), n.args[0]
    v = out.meta.get("val") if isinstance(out, fx.Node) else None
    return v is not None and shape_of(out) == shape_of(n) and all(
        isinstance(x, fx.Node) and getattr(x.meta.get("val"), "dtype", None) == v.dtype
        for x in xs)


@rule("aten.split_with_sizes.default")
class SplitWithSizes:
    """``split_with_sizes(bucket, sizes)``: the pieces of a flat bucket, when ``sizes`` are
    their numels (:mod:`~spec_lang.torch_frontend.buckets`, R35b-2); of any other tensor
    UNKNOWN."""

    @staticmethod
    def dims(n, a):
        lay = split_dims(n, a)
        if lay is None:
            raise DimsError(f"{a.where(n)}: split_with_sizes of a tensor that is no flat bucket")
        return lay

    @staticmethod
    def term(n, ctx, x, *args):  # noqa: ARG004 -- a bucket's split is lowered by buckets
        raise ctx.fail(n, "split_with_sizes of a value that is no flat bucket")


def _split_source(xs: list) -> tuple[fx.Node, list[int]] | None:
    """(split node, indices) when every ``x`` is ``getitem(split, i)`` of one split."""
    srcs = []
    for x in xs:
        if not (isinstance(x, fx.Node) and x.target is operator.getitem
                and isinstance(x.args[0], fx.Node)
                and str(x.args[0].target) == "aten.split.Tensor"):
            return None
        srcs.append((x.args[0], x.args[1]))
    if len({id(s) for s, _ in srcs}) != 1:
        return None
    return srcs[0][0], [i for _, i in srcs]


def _piece_of(a: Analysis, dim: list) -> Any:
    for x in dim[:1]:
        if x.piece is not None:
            return x.piece
        r = a.dims.find(x)
        if r.piece is not None:
            return r.piece
    return None


def broadcast_like(a: Analysis, n: fx.Node, lays: list, skip: int) -> list:
    """Unify the dims of equal-rank layouts except ``skip``; return a copy of the first."""
    out = [list(x) for x in lays[0]]
    for l in lays[1:]:
        for i, (p, q) in enumerate(zip(out, l)):
            if i != skip:
                a.same(p, q, n)
    return out


@rule("aten.stack.default")
class Stack:
    """``stack(xs)`` of scalars (the per-parameter norms of ``clip_grad_norm_``): kept as the
    list, for a reduction over the new dim (``linalg_vector_norm``, ``sum``)."""

    @staticmethod
    def dims(n, a):
        if any(shape_of(x) for x in n.args[0]):
            raise DimsError(f"{a.where(n)}: stack of non-scalar tensors")
        return [[a.dims.fresh(len(n.args[0]), a.where(n))]] if len(n.args[0]) > 1 else [[]]

    @staticmethod
    def term(n, ctx, xs, dim=0):  # noqa: ARG004
        return Stacked(tuple(x.term for x in xs))


_ = math


@rule("aten.select.int")
class Select:
    """``select(x, d, i)``: entry ``i`` of dim ``d``; of a dim that is one named dim ``A`` of
    size ``n``: ``sum_A CHUNK(x, A, n, i)`` (the block of one entry, summed away). A dim that
    is a product of named dims is UNKNOWN."""

    @staticmethod
    def dims(n, a):
        src = [list(d) for d in a.layouts[n.args[0]]]
        d = _norm(n.args[1], len(src))
        if len(a.dims.canon(src[d])) > 1:
            raise DimsError(f"{a.where(n)}: select of a dim that is a product of named dims")
        return src[:d] + src[d + 1:]

    @staticmethod
    def term(n, ctx, x, dim, index):
        d = _norm(dim, len(x.dims))
        if not x.dims[d]:
            return TV(x.term, ctx.layout(n))
        a_spec = x.dims[d][0]
        size = n.args[0].meta["val"].shape[d]
        i = index + size if index < 0 else index
        if ctx.scalar(n, 2, rank=True) != index:
            raise ctx.fail(n, "select of an entry that depends on the rank")
        if a_spec.name not in x.term.dim_names:
            return TV(x.term, ctx.layout(n))
        cur = x.term.dim(a_spec.name)
        tr = ctx.traces
        if tr is not None and tr.real is not None and \
                tr.real_sizes.get(cur.name) != tr.probe_sizes.get(cur.name):
            # CHUNK(A, size, i) is one entry only where |A| is its probe size: at real sizes
            # k times it, it is a block of k entries (stop 33)
            raise ctx.fail(n, f"select of one entry of the named dim {cur.name} (size "
                              f"{tr.real_sizes.get(cur.name)} at the real sizes) is not lowered")
        ch = term(Op.CHUNK, (x.term,), (cur.name, int(size), i),
                  tuple(DimSpec(cur.name, cur.shards + (f"#{i}/{size}",)) if dd.name == cur.name
                        else dd for dd in x.term.dims))
        keep = tuple(dd for dd in ch.dims if dd.name != cur.name)
        return TV(term(Op.EINSUM, (ch,), (tuple(k.name for k in keep),), keep), ctx.layout(n))
