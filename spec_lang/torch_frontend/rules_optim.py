"""Lowering rules: the ops ``torch.optim`` (AdamW, Adam, SGD) and ``clip_grad_norm_`` run.

The ``_foreach_*`` ops apply one elementwise law to every tensor of a list (their layouts and
values are lists); the in-place ones (``_foreach_mul_``...) write their first list. The
single-tensor ops (``lerp_``, ``addcmul_``, ``addcdiv_``) are the same laws on one tensor.
Scalars are exact (AdamW's ``lr / (1 - beta1^t)`` is a float the optimizer computed in Python:
the exact value of that float, the same in the spec and the plan).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import torch.fx as fx

from spec_lang.term import Op, Term
from spec_lang.torch_frontend.analysis import Analysis
from spec_lang.torch_frontend.lower import Lowering
from spec_lang.torch_frontend.registry import rule
from spec_lang.torch_frontend.rules_contract import reduce_sum
from spec_lang.torch_frontend.rules_elementwise import broadcast_dims
from spec_lang.torch_frontend.values import TV, const, ew

__all__: list[str] = []


def _c(x: Any) -> Term:
    return x if isinstance(x, Term) else const(x)


def _lerp(s: Term, e: Term, w: Term) -> Term:
    """``s + w (e - s)``."""
    return ew(Op.ADD, s, ew(Op.MUL, w, ew(Op.ADD, e, ew(Op.NEG, s))))


def _addcmul(s: Term, a: Term, b: Term, v: Term) -> Term:
    return ew(Op.ADD, s, ew(Op.MUL, v, a, b))


def _addcdiv(s: Term, a: Term, b: Term, v: Term) -> Term:
    return ew(Op.ADD, s, ew(Op.MUL, v, a, ew(Op.RECIP, b)))


def _list_dims(n: fx.Node, a: Analysis) -> list:
    """Per item: the items of every list argument are the same dims."""
    lists = [x for x in n.args if isinstance(x, (list, tuple)) and x
             and isinstance(x[0], fx.Node)]
    out = []
    for i, first in enumerate(lists[0]):
        lay = [list(d) for d in a.layouts[first]]
        for other in lists[1:]:
            o = a.layouts[other[i]]
            if len(o) == len(lay):
                for p, q in zip(lay, o):
                    a.same(p, q, n)
        out.append(lay)
    return out


def _item(ctx: Lowering, n: fx.Node, k: int, i: int, v: Any, lay: Any) -> Term:
    """Item ``i`` of the list argument ``k`` of ``n`` with its dims named as the output's
    item ``i`` position by position (``Lowering.fit``): a square parameter's Adam state can be
    named by one twin dim and the parameter by the other (R30b-2)."""
    arg = n.args[k] if k < len(n.args) else None
    node = arg[i] if isinstance(arg, (list, tuple)) and i < len(arg) else None
    return ctx.fit(n, node, v, lay)


def _scalars(ctx: Lowering, n: fx.Node, key: Any, count: int) -> list[Term]:
    """A Scalar, ScalarList or scalar-Tensor argument as ``count`` terms."""
    v = n.args[key] if isinstance(key, int) and key < len(n.args) else n.kwargs.get(key)
    if isinstance(v, (list, tuple)):
        return [_c(ctx.scalar_item(n, key, j)) for j in range(len(v))]
    if isinstance(v, fx.Node):
        t = ctx.env[v]
        return [t.term] * count
    return [_c(ctx.scalar(n, key))] * count


def _foreach(law: Callable[..., Term], n_lists: int, scalar_key: Any | None, doc: str,
             inplace: bool) -> type:
    class F:
        __doc__ = doc
        dims = staticmethod(_list_dims)

        @staticmethod
        def term(n, ctx, *args, **kw):
            lists = [a for a in args[:n_lists]]
            count = len(lists[0])
            sc = _scalars(ctx, n, scalar_key, count) if scalar_key is not None else [None] * count
            out = []
            for i in range(count):
                lay = ctx.layout(n, i) if ctx.analysis.layouts[n] else lists[0][i].dims
                items = [_item(ctx, n, k, i, lst[i], lay) for k, lst in enumerate(lists)]
                t = law(*items, sc[i]) if scalar_key is not None else law(*items)
                out.append(TV(t, lay))
            return out

    F.inplace = inplace
    return F


def _reg(names: tuple[str, ...], law: Callable[..., Term], n_lists: int, key: Any,
         doc: str, inplace: bool) -> None:
    rule(*names)(_foreach(law, n_lists, key, doc, inplace))


def _mul(a: Term, s: Term) -> Term:
    return ew(Op.MUL, a, s)


def _add(a: Term, s: Term) -> Term:
    return ew(Op.ADD, a, s)


def _div(a: Term, s: Term) -> Term:
    if s.op is Op.CONST and isinstance(s.attrs[0], Fraction) and s.attrs[0] != 0:
        return ew(Op.MUL, a, const(1 / s.attrs[0]))
    return ew(Op.MUL, a, ew(Op.RECIP, s))


for _inpl, _sfx in ((True, "_"), (False, "")):
    _reg((f"aten._foreach_mul{_sfx}.Scalar", f"aten._foreach_mul{_sfx}.Tensor",
          f"aten._foreach_mul{_sfx}.ScalarList"), _mul, 1, 1,
         "``_foreach_mul(xs, s)``: ``x_i * s_i``.", _inpl)
    _reg((f"aten._foreach_mul{_sfx}.List",), lambda a, b: ew(Op.MUL, a, b), 2, None,
         "``_foreach_mul(xs, ys)``: ``x_i * y_i``.", _inpl)
    _reg((f"aten._foreach_add{_sfx}.Scalar", f"aten._foreach_add{_sfx}.ScalarList"), _add, 1, 1,
         "``_foreach_add(xs, s)``: ``x_i + s_i``.", _inpl)
    _reg((f"aten._foreach_div{_sfx}.Scalar", f"aten._foreach_div{_sfx}.ScalarList",
          f"aten._foreach_div{_sfx}.Tensor"), _div, 1, 1,
         "``_foreach_div(xs, s)``: ``x_i / s_i``.", _inpl)
    _reg((f"aten._foreach_lerp{_sfx}.Scalar",), _lerp, 2, 2,
         "``_foreach_lerp(xs, es, w)``: ``x_i + w (e_i - x_i)``.", _inpl)
    _reg((f"aten._foreach_addcmul{_sfx}.Scalar", f"aten._foreach_addcmul{_sfx}.ScalarList"),
         _addcmul, 3, 3, "``_foreach_addcmul(xs, as, bs, v)``: ``x_i + v_i a_i b_i``.", _inpl)
    _reg((f"aten._foreach_addcdiv{_sfx}.Scalar", f"aten._foreach_addcdiv{_sfx}.ScalarList"),
         _addcdiv, 3, 3, "``_foreach_addcdiv(xs, as, bs, v)``: ``x_i + v_i a_i / b_i``.", _inpl)
    _reg((f"aten._foreach_sqrt{_sfx}.default",), lambda a: ew(Op.SQRT, a), 1, None,
         "``_foreach_sqrt(xs)``: ``sqrt(x_i)``.", _inpl)
    _reg((f"aten._foreach_neg{_sfx}.default",), lambda a: ew(Op.NEG, a), 1, None,
         "``_foreach_neg(xs)``: ``-x_i``.", _inpl)


_reg(("aten._foreach_zero_.default",), lambda a: ew(Op.MUL, a, const(Fraction(0))), 1, None,
     "``_foreach_zero_(xs)``: every ``x_i`` becomes ``0 * x_i`` (0 over the reals, carrying "
     "``x_i``'s dims; ``Optimizer.zero_grad(set_to_none=False)`` with foreach: round 43b, "
     "r43b_04).", True)


def _add_list(ctx: Lowering, n: fx.Node, xs: list, ys: list) -> list:
    al = n.kwargs.get("alpha", 1)
    s = const(ctx.scalar(n, "alpha")) if al != 1 else None
    out = []
    one = not isinstance(n.args[1], (list, tuple))     # one scalar tensor for every item
    for i, (x, y) in enumerate(zip(xs, ys)):
        lay = ctx.layout(n, i) if ctx.analysis.layouts[n] else x.dims
        xt = _item(ctx, n, 0, i, x, lay)
        yt = ctx.fit(n, n.args[1], y, lay) if one else _item(ctx, n, 1, i, y, lay)
        yt = yt if s is None else ew(Op.MUL, s, yt)
        out.append(TV(ew(Op.ADD, xt, yt), lay))
    return out


@rule("aten._foreach_add.List", "aten._foreach_add.Tensor")
class ForeachAddList:
    """``_foreach_add(xs, ys, alpha)``: ``x_i + alpha y_i`` (``ys`` a list or one scalar
    tensor, as the step counters' increment)."""

    dims = staticmethod(_list_dims)

    @staticmethod
    def term(n, ctx, xs, ys, **kw):  # noqa: ARG004
        if not isinstance(ys, (list, tuple)):
            ys = [ys] * len(xs)
        return _add_list(ctx, n, list(xs), list(ys))


@rule("aten._foreach_add_.List", "aten._foreach_add_.Tensor")
class ForeachAddListInplace(ForeachAddList):
    """``xs._foreach_add_(ys, alpha)``: each ``x_i`` becomes ``x_i + alpha y_i``."""


@rule("aten._foreach_norm.Scalar")
class ForeachNorm:
    """``_foreach_norm(xs, 2)``: ``(sum x_i^2)^(1/2)`` per tensor."""

    @staticmethod
    def dims(n, a):
        return [[] for _ in n.args[0]]

    @staticmethod
    def term(n, ctx, xs, ord=2, *args, **kw):  # noqa: A002, ARG004
        if float(ord) != 2.0:
            raise ctx.fail(n, f"a vector norm of order {ord}")
        out = []
        for x in xs:
            sq = TV(ew(Op.POW, x.term, attrs=(Fraction(2),)), x.dims)
            out.append(TV(ew(Op.POW, reduce_sum(sq, list(range(len(x.dims))), ()),
                             attrs=(Fraction(1, 2),)), ()))
        return out


# -- single-tensor optimizer ops -----------------------------------------------------------------
def _bcast(n: fx.Node, a: Analysis) -> list:
    return broadcast_dims(n, a, [x for x in n.args if isinstance(x, fx.Node)])


def _fitted(ctx: Lowering, n: fx.Node, *vals: Any) -> list[Term]:
    """The tensor arguments' terms with their dims named as ``n``'s output position by
    position (right-aligned, as torch broadcasts: ``Lowering.fit``). A square parameter's
    gradient, hence its Adam moments, can carry the twin of the parameter's own dim (a residual
    around ``nn.Linear(h, h)``: R30b-2); the update combines them entry by entry."""
    return [ctx.fit(n, n.args[k], v) for k, v in enumerate(vals)]


@rule("aten.lerp_.Scalar", "aten.lerp.Scalar")
class Lerp:
    """``lerp(x, e, w) = x + w (e - x)``."""

    dims = staticmethod(_bcast)

    @staticmethod
    def term(n, ctx, x, e, w):  # noqa: ARG004
        x, e = _fitted(ctx, n, x, e)
        return TV(_lerp(x, e, _c(ctx.scalar(n, 2))), ctx.layout(n))


@rule("aten.addcmul_.default", "aten.addcmul.default")
class AddCMul:
    """``addcmul(x, a, b, value) = x + value a b``."""

    dims = staticmethod(_bcast)

    @staticmethod
    def term(n, ctx, x, a, b, value=1):  # noqa: ARG004
        v = _c(ctx.scalar(n, "value", 1)) if "value" in n.kwargs else (
            _c(ctx.scalar(n, 3)) if len(n.args) > 3 else const(Fraction(1)))
        x, a, b = _fitted(ctx, n, x, a, b)
        return TV(_addcmul(x, a, b, v), ctx.layout(n))


@rule("aten.addcdiv_.default", "aten.addcdiv.default")
class AddCDiv:
    """``addcdiv(x, a, b, value) = x + value a / b``."""

    dims = staticmethod(_bcast)

    @staticmethod
    def term(n, ctx, x, a, b, value=1):  # noqa: ARG004
        v = _c(ctx.scalar(n, "value", 1)) if "value" in n.kwargs else (
            _c(ctx.scalar(n, 3)) if len(n.args) > 3 else const(Fraction(1)))
        x, a, b = _fitted(ctx, n, x, a, b)
        return TV(_addcdiv(x, a, b, v), ctx.layout(n))
