"""Lowering rules: contractions (``mm``, ``bmm``, ``addmm``) and reductions (``sum``, ``mean``,
``amax``, ``linalg_vector_norm``).

A contraction is ``EINSUM(operands, out)``; a named dim that is summed but that no operand's
term has (both operands constant along it: a broadcast) contributes its rank-local size as a
factor, since the sum of a constant over ``k`` entries is ``k`` times it. ``mean`` divides by the
rank-local sizes of the dims it reduces (``DIM_SIZE`` / ``AXIS_SIZE``, never a literal, so the
refuter's reduced sizes keep the meaning).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import torch.fx as fx

from spec_lang.term import DimSpec, Op, Term
from spec_lang.torch_frontend.analysis import shape_of
from spec_lang.torch_frontend.lower import rename_dims
from spec_lang.torch_frontend.registry import rule
from spec_lang.torch_frontend.values import TV, Stacked, const, einsum, ew, local_size_term

__all__ = ["contract", "reduce_sum"]


def contract(xs: Sequence[Term], summed: Sequence[DimSpec], out: Sequence[DimSpec]) -> Term:
    """``sum over summed`` of the product of ``xs``, as a term with dims ``out`` (those the
    operands have)."""
    have = {d.name for x in xs for d in x.dims}
    factors = [local_size_term(d) for d in summed if d.name not in have]
    t = einsum(list(xs), out)
    return ew(Op.MUL, *factors, t) if factors else t


def contract_pos(ctx, n: fx.Node, operands: Sequence[tuple], out_letters: str) -> Term:
    """A contraction written positionally, as ``einsum("bik,bkj->bij")``: ``operands`` are
    ``(node, value, letters)``; each letter's named dims are the output's (for output letters)
    or the first operand's (for summed ones), and every operand's dims are renamed to them
    where they are copies of one named dim (self-attention's ``q @ k^T``)."""
    out = ctx.layout(n)
    target: dict[str, tuple[DimSpec, ...]] = {c: out[i] for i, c in enumerate(out_letters)}
    for node, val, letters in operands:
        lay = ctx.layout(node)
        for i, c in enumerate(letters):
            target.setdefault(c, lay[i])
    out_names = {d.name for dim in out for d in dim}
    for c in list(target):
        if c in out_letters:
            continue
        if any(d.name in out_names for d in target[c]):
            # the summed dim is named like an output dim (a copy renamed back outside
            # attention): sum it under a name of its own
            target[c] = tuple(ctx.new_dim(d, "c") if d.name in out_names else d
                              for d in target[c])
    terms = []
    for node, val, letters in operands:
        lay = ctx.layout(node)
        ren: dict[str, DimSpec] = {}
        for i, c in enumerate(letters):
            if len(lay[i]) != len(target[c]):
                raise ctx.fail(n, "a contraction of dims that are different products of named "
                                  "dims")
            for a, b in zip(lay[i], target[c]):
                if a.name != b.name and a.name in val.term.dim_names:
                    ren[a.name] = b
        terms.append(rename_dims(val.term, ren, ctx.same_size))
    summed = [d for c, dims in target.items() if c not in out_letters for d in dims]
    if any(d.name in out_names for d in summed):
        raise ctx.fail(n, "a contraction whose summed dim is also an output dim")
    return contract(terms, summed, [d for dim in out for d in dim])


def reduce_sum(x: TV, reduced: Sequence[int], out_layout: tuple) -> Term:
    """``x`` summed over the torch dims ``reduced``."""
    summed = [d for i in reduced for d in x.dims[i]]
    keep = [d for dim in out_layout for d in dim]
    return contract([x.term], summed, keep)


def _norm_dims(dims: object, rank: int) -> list[int]:
    if dims is None:
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    ds = [d + rank if d < 0 else d for d in dims]  # type: ignore[union-attr]
    return ds if ds else list(range(rank))


def _reduce_layout(n: fx.Node, a, dims: list[int], keepdim: bool) -> list:
    src = a.layouts[n.args[0]]
    return [([] if keepdim else None) if i in dims else list(d)
            for i, d in enumerate(src) if keepdim or i not in dims]


@rule("aten.mm.default")
class MM:
    """``mm(x, w)[i, j] = sum_k x[i, k] w[k, j]``."""

    @staticmethod
    def dims(n, a):
        x, w = (a.layouts[t] for t in n.args[:2])
        a.same(x[1], w[0], n)
        return [list(x[0]), list(w[1])]

    @staticmethod
    def term(n, ctx, x, w):
        return TV(contract_pos(ctx, n, [(n.args[0], x, "ik"), (n.args[1], w, "kj")], "ij"),
                  ctx.layout(n))


@rule("aten.mv.default")
class MV:
    """``mv(x, v)[i] = sum_k x[i, k] v[k]``."""

    @staticmethod
    def dims(n, a):
        x, v = (a.layouts[t] for t in n.args[:2])
        a.same(x[1], v[0], n)
        return [list(x[0])]

    @staticmethod
    def term(n, ctx, x, v):
        return TV(contract_pos(ctx, n, [(n.args[0], x, "ik"), (n.args[1], v, "k")], "i"),
                  ctx.layout(n))


@rule("aten.bmm.default")
class BMM:
    """``bmm(x, y)[b, i, j] = sum_k x[b, i, k] y[b, k, j]``."""

    @staticmethod
    def dims(n, a):
        x, y = (a.layouts[t] for t in n.args[:2])
        a.same(x[0], y[0], n)
        a.same(x[2], y[1], n)
        return [list(x[0]), list(x[1]), list(y[2])]

    @staticmethod
    def term(n, ctx, x, y):
        return TV(contract_pos(ctx, n, [(n.args[0], x, "bik"), (n.args[1], y, "bkj")], "bij"),
                  ctx.layout(n))


@rule("aten.addmm.default")
class AddMM:
    """``addmm(b, x, w, beta, alpha) = beta * b + alpha * x @ w`` (``nn.Linear`` with bias)."""

    @staticmethod
    def dims(n, a):
        b, x, w = (a.layouts[t] for t in n.args[:3])
        a.same(x[1], w[0], n)
        out = [list(x[0]), list(w[1])]
        sb = shape_of(n.args[0])
        for j, dim in enumerate(b):
            i = 2 - len(sb) + j
            if sb[j] != 1:
                a.same(out[i], dim, n)
        return out

    @staticmethod
    def term(n, ctx, b, x, w, beta=1, alpha=1):
        out = ctx.layout(n)
        mm = contract_pos(ctx, n, [(n.args[1], x, "ik"), (n.args[2], w, "kj")], "ij")
        if alpha != 1:
            mm = ew(Op.MUL, const(ctx.scalar(n, "alpha")), mm)
        bt = ctx.fit(n, n.args[0], b)
        bt = bt if beta == 1 else ew(Op.MUL, const(ctx.scalar(n, "beta")), bt)
        return TV(ew(Op.ADD, bt, mm), out)


@rule("aten.sum.dim_IntList", "aten.sum.default")
class Sum:
    """``sum(x, dims, keepdim)``: ``EINSUM([x], kept dims)``."""

    @staticmethod
    def dims(n, a):
        rank = len(shape_of(n.args[0]))
        dims = _norm_dims(n.args[1] if len(n.args) > 1 else None, rank)
        keep = bool(n.args[2]) if len(n.args) > 2 else bool(n.kwargs.get("keepdim", False))
        return _reduce_layout(n, a, dims, keep)

    @staticmethod
    def term(n, ctx, x, *args, **kw):  # noqa: ARG004
        if kw.get("dtype") is not None and not kw["dtype"].is_floating_point:
            raise ctx.fail(n, "an integer sum")
        if isinstance(x, Stacked):
            return TV(ew(Op.ADD, *x.items), ())
        rank = len(x.dims)
        dims = _norm_dims(n.args[1] if len(n.args) > 1 else None, rank)
        out = ctx.layout(n)
        return TV(reduce_sum(x, dims, out), out)


@rule("aten.mean.dim", "aten.mean.default")
class Mean:
    """``mean(x, dims) = sum(x, dims) / prod(local sizes of dims)``."""

    dims = Sum.dims

    @staticmethod
    def term(n, ctx, x, *args, **kw):  # noqa: ARG004
        if isinstance(x, Stacked):   # torch.stack(losses).mean(): the micro-batches' mean
            if kw.get("dtype") is not None:
                raise ctx.fail(n, "a mean with a dtype of a stack")
            k = Fraction(len(x.items))
            total = x.items[0] if k == 1 else ew(Op.ADD, *x.items)
            return TV(ew(Op.MUL, const(1 / k), total), ())
        rank = len(x.dims)
        dims = _norm_dims(n.args[1] if len(n.args) > 1 else None, rank)
        out = ctx.layout(n)
        s = reduce_sum(x, dims, out)
        inv = [ew(Op.POW, local_size_term(d), attrs=(Fraction(-1),)) for i in dims
               for d in x.dims[i]]
        return TV(ew(Op.MUL, *inv, s) if inv else s, out)


@rule("aten.amax.default")
class AMax:
    """``amax(x, dims, keepdim)``: ``REDUCE_MAX`` over the dims (forward only)."""

    dims = Sum.dims

    @staticmethod
    def term(n, ctx, x, *args, **kw):  # noqa: ARG004
        rank = len(x.dims)
        dims = _norm_dims(n.args[1] if len(n.args) > 1 else None, rank)
        red = [d for i in dims for d in x.dims[i] if d.name in x.term.dim_names]
        out = ctx.layout(n)
        if not red:
            return TV(x.term, out)
        from spec_lang.term import term
        keep = tuple(d for d in x.term.dims if d.name not in {r.name for r in red})
        return TV(term(Op.REDUCE_MAX, (x.term,), (tuple(sorted(r.name for r in red)),), keep),
                  out)


@rule("aten.linalg_vector_norm.default")
class VectorNorm:
    """``linalg_vector_norm(x, 2, dims) = (sum x^2)^(1/2)`` (the 2-norm only); of a ``stack`` of
    scalars, ``(sum_i x_i^2)^(1/2)``."""

    @staticmethod
    def dims(n, a):
        rank = len(shape_of(n.args[0]))
        dims = _norm_dims(n.args[2] if len(n.args) > 2 else n.kwargs.get("dim"), rank)
        keep = bool(n.args[3]) if len(n.args) > 3 else bool(n.kwargs.get("keepdim", False))
        return _reduce_layout(n, a, dims, keep)

    @staticmethod
    def term(n, ctx, x, ord=2, *args, **kw):  # noqa: A002, ARG004
        if float(ord) != 2.0:
            raise ctx.fail(n, f"a vector norm of order {ord}")
        two, half = Fraction(2), Fraction(1, 2)
        if isinstance(x, Stacked):
            s = ew(Op.ADD, *(ew(Op.POW, t, attrs=(two,)) for t in x.items))
            return TV(ew(Op.POW, s, attrs=(half,)), ())
        rank = len(x.dims)
        dims = _norm_dims(n.args[2] if len(n.args) > 2 else kw.get("dim"), rank)
        out = ctx.layout(n)
        sq = TV(ew(Op.POW, x.term, attrs=(two,)), x.dims)
        return TV(ew(Op.POW, reduce_sum(sq, dims, out), attrs=(half,)), out)
