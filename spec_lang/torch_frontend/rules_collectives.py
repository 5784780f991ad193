"""Lowering rules: functional collectives (``_c10d_functional.*``) to IR collectives.

A collective's process group is mapped to its mesh axis (:meth:`Lowering.axis`, checked on every
traced rank). DTensor redistributes a dim other than 0 with a layout shuffle around the
dim-0 collective; the rules recognise both idioms by their dims, never by op names alone:

* all-gather along ``d``: ``all_gather_into_tensor(x)`` stacks the ranks' ``x`` along dim 0
  (a *rank dim*); ``split`` of that dim into ``|axis|`` pieces gives ``BROADCAST(x, axis, i)``
  (the value on coordinate ``i``); ``cat`` of those pieces, in rank order, along ``d`` whose
  outermost named dim is sharded over ``axis`` last is ``ALL_GATHER(x, axis, A)``. When ``d``
  is dim 0 itself the gather is direct.
* reduce-scatter along ``d``: ``cat`` along dim 0 of the ``|axis|`` blocks of ``y`` along
  ``d``, in order, then ``reduce_scatter_tensor`` is ``REDUCE_SCATTER(y, axis, A)``
  (``= SHARD(ALL_REDUCE(y, axis), A, axis)``). When ``d`` is dim 0 it is direct.
* ``all_reduce(x, "sum" | "max" | "avg")``: ``ALL_REDUCE``; avg is ``1/|axis|`` times the sum.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import torch.fx as fx

from spec_lang.term import DimSpec, Op, Term, term
from spec_lang.torch_frontend.analysis import Analysis
from spec_lang.torch_frontend.dims import DimsError
from spec_lang.torch_frontend.lower import Lowering
from spec_lang.torch_frontend.registry import rule
from spec_lang.torch_frontend.values import TV, ew

__all__ = ["RankStack", "ChunkStack"]


@dataclass(frozen=True)
class RankStack:
    """``all_gather_into_tensor(x)`` whose dim 0 is not sharded over the axis: the ranks' ``x``
    stacked along a rank dim (only ``split`` into per-rank pieces reads it)."""

    x: TV
    axis: str

    def relabel(self, dims: tuple) -> RankStack:  # noqa: ARG002 -- wait_tensor keeps it
        return self


@dataclass(frozen=True)
class ChunkStack:
    """``cat`` along dim 0 of the ``parts`` blocks of ``y`` along torch dim ``dim`` (only
    ``reduce_scatter_tensor`` reads it)."""

    y: TV
    dim: int
    parts: int

    def relabel(self, dims: tuple) -> ChunkStack:  # noqa: ARG002 -- wait_tensor keeps it
        return self


def _axis_of_group(a: Analysis, n: fx.Node, group: Any) -> str:
    groups = getattr(a, "groups", {})
    if group not in groups:
        raise DimsError(f"{a.where(n)}: process group {group!r} is not an axis of the mesh")
    return groups[group]


@rule("_c10d_functional.all_reduce.default")
class AllReduce:
    """``all_reduce(x, op, group)``: ``ALL_REDUCE(x, axis, sum|max)``; ``avg`` is
    ``|axis|^-1 * ALL_REDUCE(x, axis, sum)``."""

    @staticmethod
    def dims(n, a):
        return [list(d) for d in a.layouts[n.args[0]]]

    @staticmethod
    def term(n, ctx, x, op, group):
        ax = ctx.axis(n, 2)
        op = op.lower()
        if op in ("sum", "max"):
            return TV(term(Op.ALL_REDUCE, (x.term,), (ax, op), x.term.dims), ctx.layout(n))
        if op == "avg":
            s = term(Op.ALL_REDUCE, (x.term,), (ax, "sum"), x.term.dims)
            inv = ew(Op.POW, term(Op.AXIS_SIZE, (), (ax,), ()), attrs=(Fraction(-1),))
            return TV(ew(Op.MUL, inv, s), ctx.layout(n))
        raise ctx.fail(n, f"all_reduce with op {op!r}")


@rule("_c10d_functional.all_gather_into_tensor.default")
class AllGather:
    """``all_gather_into_tensor(x, n, group)``: ``ALL_GATHER(x, axis, A)`` when dim 0's
    outermost named dim ``A`` is sharded over the axis last; else the rank stack (see module)."""

    @staticmethod
    def dims(n, a):
        ax = _axis_of_group(a, n, n.args[2])
        src = [list(d) for d in a.layouts[n.args[0]]]
        atoms = a.dims.canon(src[0])
        if atoms:
            info = a.dims.info(atoms[0])
            if info is not None and info[1] and info[1][-1] == ax:
                src[0] = [a.dims.gathered(atoms[0], ax, a.where(n))] + atoms[1:]
                return src
        r = a.dims.fresh(a.dims.axis_sizes[ax], a.where(n))
        r.rank_axis = ax
        src[0] = [r] + atoms
        return src

    @staticmethod
    def term(n, ctx, x, group_size, group):  # noqa: ARG004
        ax = ctx.axis(n, 2)
        out = ctx.layout(n)
        if ctx.analysis.dims.find(ctx.analysis.layouts[n][0][0]).rank_axis == ax \
                if ctx.analysis.layouts[n][0] else False:
            return RankStack(x, ax)
        a_in = x.dims[0][0]
        a_out = out[0][0]
        if a_in.name not in x.term.dim_names:
            raise ctx.fail(n, "all-gather of a value constant along the gathered dim")
        return TV(term(Op.ALL_GATHER, (x.term,), (ax, a_in.name),
                       tuple(a_out if d.name == a_in.name else d for d in x.term.dims)), out)


@rule("_c10d_functional.reduce_scatter_tensor.default")
class ReduceScatter:
    """``reduce_scatter_tensor(x, "sum", n, group)``: ``REDUCE_SCATTER(x, axis, A)`` over the
    outermost named dim ``A`` of dim 0, or of the dim the chunk stack was cut from (see
    module)."""

    @staticmethod
    def dims(n, a):
        ax = _axis_of_group(a, n, n.args[3])
        x = n.args[0]
        mark = a.marks.get(x)
        if mark is not None and mark[0] == "chunkstack" and mark[3] == a.dims.axis_sizes[ax]:
            _, y, k, _parts = mark
            lay = [list(d) for d in a.layouts[y]]
            atoms = a.dims.canon(lay[k])
            lay[k] = [a.dims.scattered(atoms[0], ax, a.where(n))] + atoms[1:]
            return lay
        lay = [list(d) for d in a.layouts[x]]
        atoms = a.dims.canon(lay[0])
        if not atoms:
            raise DimsError(f"{a.where(n)}: reduce-scatter of a size-1 dim")
        lay[0] = [a.dims.scattered(atoms[0], ax, a.where(n))] + atoms[1:]
        return lay

    @staticmethod
    def term(n, ctx, x, op, group_size, group):  # noqa: ARG004
        ax = ctx.axis(n, 3)
        if op.lower() != "sum":
            raise ctx.fail(n, f"reduce_scatter with op {op!r}")
        out = ctx.layout(n)
        if isinstance(x, ChunkStack):
            y, k = x.y, x.dim
        else:
            y, k = x, 0
        a_in = y.dims[k][0]
        if a_in.name not in y.term.dim_names:
            raise ctx.fail(n, "reduce-scatter of a value constant along the scattered dim")
        cur = y.term.dim(a_in.name)
        new = DimSpec(cur.name, cur.shards + (ax,))
        return TV(term(Op.REDUCE_SCATTER, (y.term,), (ax, cur.name),
                       tuple(new if d.name == cur.name else d for d in y.term.dims)), out)


def _pieces_of_rank_stack(x: Any) -> bool:
    return isinstance(x, RankStack)


def broadcast_piece(x: RankStack, i: int, layout: tuple) -> TV:
    """Piece ``i`` of a rank stack: ``BROADCAST(x, axis, i)``."""
    return TV(term(Op.BROADCAST, (x.x.term,), (x.axis, i), x.x.term.dims), layout)


def gather_of_pieces(ctx: Lowering, n: fx.Node, xs: list, d: int) -> TV | None:
    """``cat`` of ``BROADCAST(y, axis, i)`` for ``i = 0..|axis|-1`` along ``d``: the all-gather of
    ``y`` along ``d`` (None when ``xs`` is not that)."""
    if not xs or not all(isinstance(x, TV) and x.term.op is Op.BROADCAST for x in xs):
        return None
    y = xs[0].term.args[0]
    ax = xs[0].term.attrs[0]
    if any(x.term.args[0] is not y or x.term.attrs != (ax, i) for i, x in enumerate(xs)):
        return None
    out = ctx.layout(n)
    a_in = xs[0].dims[d][0]
    if a_in.name not in y.dim_names:
        raise ctx.fail(n, "all-gather of a value constant along the gathered dim")
    a_out = out[d][0]
    return TV(term(Op.ALL_GATHER, (y,), (ax, a_in.name),
                   tuple(a_out if dd.name == a_in.name else dd for dd in y.dims)), out)


@rule("c10d.allreduce_.default")
class C10dAllReduce:
    """``dist.all_reduce(t, op, group)`` (in place): each tensor becomes ``ALL_REDUCE(t, axis,
    sum|max)``; ``AVG`` is ``|axis|^-1`` times the sum."""

    @staticmethod
    def dims(n, a):
        return ([[list(d) for d in a.layouts[t]] for t in n.args[0]], None)

    @staticmethod
    def term(n, ctx, tensors, pg, op, *args):  # noqa: ARG004
        if not (len(n.args) > 4 and n.args[4] is False):
            # ``async_op=True`` (the schema's default: a synchronous call passes False): the
            # tensors are written when the work is waited, which the trace does not record, so
            # a read before the wait cannot be told from one after (adversarial round 26)
            raise ctx.fail(n, "dist.all_reduce with async_op=True: where its work is waited is "
                              "not traced (a read before the wait races the write); call it "
                              "synchronously")
        if len(n.args[0]) != 1:
            # gloo sums every tensor of the list, across every rank, into each of them
            # (adversarial round 28, R28-6: ProcessGroup.allreduce([a, b]))
            raise ctx.fail(n, "an all-reduce of a list of tensors (ProcessGroup.allreduce with "
                              "several tensors: gloo sums all of them into each)")
        if not all(isinstance(t, fx.Node) and t.meta["val"].is_contiguous() for t in n.args[0]):
            # gloo reduces ``numel`` elements of raw memory from the data pointer, whatever the
            # strides (adversarial round 27, R27-1: a transposed or strided buffer)
            raise ctx.fail(n, "dist.all_reduce of a tensor that is not contiguous (gloo reduces "
                              "its raw memory, NCCL refuses it)")
        try:
            ax = ctx.traces.pg_axis(n, 1)
        except ValueError as e:
            raise ctx.fail(n, str(e)) from None
        code = getattr(op, "op", None)
        red = {0: "sum", 1: "avg", 4: "max"}.get(code)
        if red is None:
            raise ctx.fail(n, f"all_reduce with ReduceOp {code}")
        outs = []
        for t in tensors:
            r = term(Op.ALL_REDUCE, (t.term,), (ax, "max" if red == "max" else "sum"), t.term.dims)
            if red == "avg":
                r = ew(Op.MUL, ew(Op.POW, term(Op.AXIS_SIZE, (), (ax,), ()),
                                  attrs=(Fraction(-1),)), r)
            outs.append(TV(r, t.dims))
        return (outs, None)
