"""Lowering rules: layer normalisation (``nn.LayerNorm``, GPT-2's; RMSNorm decomposes into
elementwise ops and a mean).

With ``D`` the normalised dims and ``N = prod |D|`` (Ba et al. 2016, "Layer Normalization",
eq. 4; PyTorch's ``native_layer_norm``):

* ``mean = sum_D x / N``, ``rstd = (sum_D (x - mean)^2 / N + eps)^(-1/2)``,
  ``out = (x - mean) rstd w + b``;
* backward, with ``xhat = (x - mean) rstd`` and ``g = dout * w`` (the forward's ``mean`` and
  ``rstd``): ``dx = rstd (g - mean_D g - xhat mean_D(g xhat))``, ``dw = sum_batch dout xhat``,
  ``db = sum_batch dout``.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import torch.fx as fx

from spec_lang.term import DimSpec, Op, Term
from spec_lang.torch_frontend.analysis import Analysis
from spec_lang.torch_frontend.lower import Lowering
from spec_lang.torch_frontend.registry import rule
from spec_lang.torch_frontend.values import TV, const, einsum, ew, local_size_term

__all__: list[str] = []


def _split(x_lay: list, k: int) -> tuple[list, list]:
    """(batch dims, normalised dims) of a layout whose last ``k`` dims are normalised."""
    return x_lay[:len(x_lay) - k], x_lay[len(x_lay) - k:]


def _mean(t: Term, red: list[DimSpec], keep: list[DimSpec]) -> Term:
    inv = [ew(Op.POW, local_size_term(d), attrs=(Fraction(-1),)) for d in red]
    s = einsum([t], keep)
    return ew(Op.MUL, *inv, s)


@rule("aten.native_layer_norm.default")
class LayerNorm:
    """``(out, mean, rstd) = native_layer_norm(x, shape, w, b, eps)`` (module docstring)."""

    @staticmethod
    def dims(n: fx.Node, a: Analysis) -> tuple:
        x, shape, w, b = n.args[:4]
        lx = [list(d) for d in a.layouts[x]]
        batch, norm = _split(lx, len(shape))
        for p in (w, b):
            if isinstance(p, fx.Node):
                for q, r in zip(norm, a.layouts[p]):
                    a.same(q, r, n)
        stats = [list(d) for d in batch] + [[] for _ in norm]
        return (lx, stats, [list(d) for d in stats])

    @staticmethod
    def term(n: fx.Node, ctx: Lowering, x: TV, shape: Any, w: Any, b: Any, eps: Any) -> tuple:
        lo, ls = ctx.layout(n, 0), ctx.layout(n, 1)
        batch, norm = _split(list(lo), len(shape))
        red = [d for dim in norm for d in dim]
        keep = [d for dim in batch for d in dim]
        # operands named as the output by position (R31d-2: a weight whose dim is the twin of a
        # batch dim was applied along that dim, by name)
        xt = ctx.fit(n, n.args[0], x, lo)
        mean = _mean(xt, red, keep)
        c = ew(Op.ADD, xt, ew(Op.NEG, mean))
        var = _mean(ew(Op.POW, c, attrs=(Fraction(2),)), red, keep)
        e = ctx.scalar(n, 4)
        rstd = ew(Op.RSQRT, ew(Op.ADD, var, e if isinstance(e, Term) else const(e)))
        out = ew(Op.MUL, c, rstd)
        if w is not None:
            out = ew(Op.MUL, out, ctx.fit(n, n.args[2], w, lo))
        if b is not None:
            out = ew(Op.ADD, out, ctx.fit(n, n.args[3], b, lo))
        return (TV(out, lo), TV(mean, ls), TV(rstd, ls))


@rule("aten.native_layer_norm_backward.default")
class LayerNormBackward:
    """``(dx, dw, db) = native_layer_norm_backward(dout, x, shape, mean, rstd, w, b, mask)``
    (module docstring)."""

    @staticmethod
    def dims(n: fx.Node, a: Analysis) -> tuple:
        g, x, shape, mean, rstd, w, b = n.args[:7]
        lx = [list(d) for d in a.layouts[x]]
        for p, q in zip(a.layouts[g], lx):
            a.same(p, q, n)
        _, norm = _split(lx, len(shape))
        lw = [list(d) for d in norm]
        return (lx, lw, [list(d) for d in lw])

    @staticmethod
    def term(n: fx.Node, ctx: Lowering, g: TV, x: TV, shape: Any, mean: TV, rstd: TV,
             w: Any, b: Any, mask: Any) -> tuple:
        lx, lw = ctx.layout(n, 0), ctx.layout(n, 1)
        batch, norm = _split(list(lx), len(shape))
        red = [d for dim in norm for d in dim]
        keep = [d for dim in batch for d in dim]
        gt = ctx.fit(n, n.args[0], g, lx)
        xt = ctx.fit(n, n.args[1], x, lx)
        xhat = ew(Op.MUL, ew(Op.ADD, xt, ew(Op.NEG, mean.term)), rstd.term)
        gw = ew(Op.MUL, gt, ctx.fit(n, n.args[5], w, lx)) if w is not None else gt
        dx = ew(Op.MUL, rstd.term, ew(Op.ADD, gw, ew(Op.NEG, _mean(gw, red, keep)),
                                       ew(Op.NEG, ew(Op.MUL, xhat,
                                                     _mean(ew(Op.MUL, gw, xhat), red, keep)))))
        wdims = [d for dim in lw for d in dim]
        dw = einsum([ew(Op.MUL, gt, xhat)], wdims) if w is not None else None
        db = einsum([gt], wdims) if b is not None else None
        return (TV(dx, lx), TV(dw, lw) if dw is not None else None,
                TV(db, lw) if db is not None else None)
