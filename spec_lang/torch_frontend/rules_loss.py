"""Lowering rules: softmax, log-softmax and the negative log-likelihood (cross-entropy).

Laws (``d`` the named dims of the torch dim reduced, ``m = stop_gradient(max_d x)``; the shift
cancels over the reals, so value and gradient are exact, as in ``spec_lang.ops.logsumexp``):

* ``_log_softmax(x, d) = x - m - log(sum_d exp(x - m))``;
  ``_log_softmax_backward_data(g, y, d) = g - exp(y) sum_d g``;
* ``_softmax(x, d) = e / sum_d e``, ``e = exp(x - m)``;
  ``_softmax_backward_data(g, y, d) = y (g - sum_d g y)``;
* ``nll_loss_forward(lp, t, reduction)``: ``-sum_n lp[n, t_n]`` (``sum``), divided by the
  number of targets (``mean``; ``total_weight``), or per target (``none``);
  ``nll_loss_backward(g, lp, t, ...) = -ONE_HOT(t) * g / total_weight`` (``mean``).

``ignore_index`` is honoured when it cannot be a value of the index input (an index input is in
``[0, |V|)``, so the default ``-100`` never matches and every target counts); per-class weights
are UNKNOWN.
"""

from __future__ import annotations

from fractions import Fraction

import torch.fx as fx

from spec_lang.term import DimSpec, Op, Term, term
from spec_lang.torch_frontend.analysis import shape_of
from spec_lang.torch_frontend.indexing import Idx, MaskedLogits, one_hot
from spec_lang.torch_frontend.lower import Lowering
from spec_lang.torch_frontend.registry import rule
from spec_lang.torch_frontend.rules_index import _range, _sizes
from spec_lang.torch_frontend.values import TV, const, einsum, ew, local_size_term

__all__ = ["logsumexp_terms"]


def _dim(n: fx.Node, k: int, rank: int) -> int:
    d = n.args[k]
    return d + rank if d < 0 else d


def _reduced(x: TV, d: int, ctx: Lowering, n: fx.Node) -> list[DimSpec]:
    red = list(x.dims[d])
    missing = [r for r in red if r.name not in x.term.dim_names]
    if missing:
        raise ctx.fail(n, "a softmax along a dim the value is constant along")
    return red


def _max(x: Term, red: list[DimSpec]) -> Term:
    keep = tuple(dd for dd in x.dims if dd.name not in {r.name for r in red})
    mx = term(Op.REDUCE_MAX, (x,), (tuple(sorted(r.name for r in red)),), keep)
    return term(Op.STOP_GRAD, (mx,), (), mx.dims)


def _sum(x: Term, red: list[DimSpec]) -> Term:
    names = {r.name for r in red}
    return einsum([x], tuple(dd for dd in x.dims if dd.name not in names))


def sum_onehot(x: Term, red: list[DimSpec]) -> Term:
    """``sum_d x``, where a factor ``ONE_HOT(idx, d)`` over a whole (unsharded) ``d`` that no
    other factor has sums to 1: ``sum_v c * [idx = v] = c`` (an index input lies in ``[0, |d|)``,
    so exactly one ``v`` matches). The cross-entropy backward's ``sum_V g`` with
    ``g = -ONE_HOT(labels, V) / N``."""
    if len(red) == 1 and not red[0].shards and x.op in (Op.MUL, Op.NEG, Op.ONE_HOT):
        v = red[0].name
        facs = list(x.args) if x.op is Op.MUL else [x]
        neg = x.op is Op.NEG
        if neg:
            facs = list(x.args[0].args) if x.args[0].op is Op.MUL else [x.args[0]]
        oh = [f for f in facs if f.op is Op.ONE_HOT and f.attrs[0] == v]
        rest = [f for f in facs if f not in oh]
        if len(oh) == 1 and not any(v in f.dim_names for f in rest) \
                and not oh[0].dim(v).shards:
            t = ew(Op.MUL, *rest) if len(rest) > 1 else rest[0] if rest else const(Fraction(1))
            return ew(Op.NEG, t) if neg else t
    return _sum(x, red)


def logsumexp_terms(x: Term, red: list[DimSpec]) -> tuple[Term, Term]:
    """``(x - m, log(sum exp(x - m)))`` with ``m`` the stop-gradient max over ``red``."""
    m = _max(x, red)
    sh = ew(Op.ADD, x, ew(Op.NEG, m))
    return sh, ew(Op.LOG, _sum(ew(Op.EXP, sh), red))


def _same_dims(n, a):
    return [list(d) for d in a.layouts[n.args[0]]]


def _bcast2(n, a):
    g, y = n.args[:2]
    lg, ly = a.layouts[g], a.layouts[y]
    for p, q in zip(lg, ly):
        a.same(p, q, n)
    return [list(d) for d in lg]


@rule("aten._log_softmax.default")
class LogSoftmax:
    """``log_softmax(x, d) = x - m - log(sum_d exp(x - m))``."""

    dims = staticmethod(_same_dims)

    @staticmethod
    def term(n, ctx, x, dim, half_to_float=False):  # noqa: ARG004
        red = _reduced(x, _dim(n, 1, len(x.dims)), ctx, n)
        sh, lse = logsumexp_terms(x.term, red)
        return TV(ew(Op.ADD, sh, ew(Op.NEG, lse)), ctx.layout(n))


@rule("aten._log_softmax_backward_data.default")
class LogSoftmaxBackward:
    """``g - exp(y) * sum_d g`` (``y`` the log-softmax output)."""

    dims = staticmethod(_bcast2)

    @staticmethod
    def term(n, ctx, g, y, dim, dtype):  # noqa: ARG004
        out = ctx.layout(n)
        red = list(out[_dim(n, 2, len(g.dims))])
        gt, yt = ctx.fit(n, n.args[0], g), ctx.fit(n, n.args[1], y)
        s = sum_onehot(gt, red) if any(r.name in gt.dim_names for r in red) else ew(
            Op.MUL, gt, *(local_size_term(r) for r in red))
        return TV(ew(Op.ADD, gt, ew(Op.NEG, ew(Op.MUL, ew(Op.EXP, yt), s))), out)


@rule("aten._softmax.default", "aten._safe_softmax.default")
class Softmax:
    """``softmax(x, d) = e / sum_d e``, ``e = exp(x - m)``; of scores with an additive
    ``-inf`` mask, ``e = exp(x - m) * mask`` (``exp(-inf) = 0``). ``_safe_softmax`` gives 0 on
    a row masked entirely; the masks lowered here (causal) leave every row an entry."""

    dims = staticmethod(_same_dims)

    @staticmethod
    def term(n, ctx, x, dim, half_to_float=False):  # noqa: ARG004
        mask = None
        if isinstance(x, MaskedLogits):
            if x.mask.op not in (Op.CAUSAL_MASK, Op.CONST):
                raise ctx.fail(n, "a softmax of scores masked by something other than a causal "
                                  "mask (a row could be masked entirely)")
            mask, x = x.mask, TV(x.t, x.dims)
        red = _reduced(x, _dim(n, 1, len(x.dims)), ctx, n)
        e = ew(Op.EXP, ew(Op.ADD, x.term, ew(Op.NEG, _max(x.term, red))))
        if mask is not None:
            e = ew(Op.MUL, e, mask)
        return TV(ew(Op.MUL, e, ew(Op.RECIP, _sum(e, red))), ctx.layout(n))


@rule("aten._softmax_backward_data.default")
class SoftmaxBackward:
    """``y * (g - sum_d g y)`` (``y`` the softmax output)."""

    dims = staticmethod(_bcast2)

    @staticmethod
    def term(n, ctx, g, y, dim, dtype):  # noqa: ARG004
        out = ctx.layout(n)
        red = list(out[_dim(n, 2, len(g.dims))])
        gt, yt = ctx.fit(n, n.args[0], g), ctx.fit(n, n.args[1], y)
        gy = ew(Op.MUL, gt, yt)
        return TV(ew(Op.MUL, yt, ew(Op.ADD, gt, ew(Op.NEG, _sum(gy, red)))), out)


def _check_target(ctx: Lowering, n: fx.Node, t: object, weight: object, ignore: int) -> Idx:
    if not isinstance(t, Idx) or t.off != 0 or t.valid is not None:
        raise ctx.fail(n, "nll_loss with a target that is not an index input")
    if weight is not None:
        raise ctx.fail(n, "nll_loss with class weights")
    rng = _range(ctx, t.base)
    _, probe, real = _sizes(ctx)
    if rng is None or 0 <= ignore < max(probe.get(rng.name, 0), real.get(rng.name, 0)):
        raise ctx.fail(n, f"ignore_index {ignore} may be a target value (targets are indices "
                          f"in [0, |V|))")
    return t


def _count(t: Idx) -> Term:
    """The number of targets on this rank (every target counts: see the module docstring)."""
    facs = [local_size_term(d) for dim in t.dims for d in dim]
    return ew(Op.MUL, *facs) if len(facs) > 1 else facs[0] if facs else const(Fraction(1))


@rule("aten.nll_loss_forward.default")
class NllLoss:
    """``nll_loss_forward(lp, t, w, reduction, ignore) -> (loss, total_weight)``."""

    @staticmethod
    def dims(n, a):
        lp, t = n.args[:2]
        llp, lt = a.layouts[lp], a.layouts[t]
        cdim = 1 if len(llp) > 1 else 0
        rest = [d for i, d in enumerate(llp) if i != cdim]
        for p, q in zip(rest, lt):
            a.same(p, q, n)
        a.index_of(t, llp[cdim], n)
        red = n.args[3]
        out = [list(d) for d in lt] if red == 0 else []
        return (out, [])

    @staticmethod
    def term(n, ctx, lp, t, weight, reduction, ignore_index):
        t = _check_target(ctx, n, t, weight, ignore_index)
        cdim = 1 if len(lp.dims) > 1 else 0
        c = lp.dims[cdim]
        if len(c) != 1:
            raise ctx.fail(n, "nll_loss over a class dim that is a product of named dims")
        lay0 = ctx.layout(n, 0)
        tdims = tuple(d for dim in t.dims for d in dim)
        picked = einsum([lp.term, one_hot(t.base, c[0])], tdims)
        cnt = _count(t)
        if reduction == 0:
            return (TV(ew(Op.NEG, picked), lay0), TV(const(Fraction(0)), ()))
        total = ew(Op.NEG, einsum([picked], ()))
        if reduction == 1:
            total = ew(Op.MUL, total, ew(Op.RECIP, cnt))
        return (TV(total, ()), TV(cnt, ()))


@rule("aten.nll_loss_backward.default")
class NllLossBackward:
    """``nll_loss_backward(g, lp, t, w, reduction, ignore, total_weight)[n, c] =
    -[t_n = c] g / total_weight`` (``mean``), ``-[t_n = c] g`` (``sum``), ``-[t_n = c] g_n``
    (``none``)."""

    @staticmethod
    def dims(n, a):
        return [list(d) for d in a.layouts[n.args[1]]]

    @staticmethod
    def term(n, ctx, g, lp, t, weight, reduction, ignore_index, total_weight):
        t = _check_target(ctx, n, t, weight, ignore_index)
        cdim = 1 if len(lp.dims) > 1 else 0
        oh = one_hot(t.base, lp.dims[cdim][0])
        gt = g.term
        if reduction == 1:
            gt = ew(Op.MUL, gt, ew(Op.RECIP, total_weight.term))
        return TV(ew(Op.NEG, ew(Op.MUL, oh, gt)), ctx.layout(n))


_ = shape_of
