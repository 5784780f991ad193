"""Lowering rules: elementwise ops, their backward formulas, constants and casts.

Each class states its law in its docstring; dims broadcast right-aligned as in torch, and the
IR broadcasts by name, so a term only carries the dims it varies along.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import torch
import torch.fx as fx

from spec_lang.term import Op, Term
from spec_lang.torch_frontend.analysis import Analysis, fresh_layout, shape_of
from spec_lang.torch_frontend.lower import Lowering, as_term
from spec_lang.torch_frontend.registry import rule
from spec_lang.torch_frontend.values import TV, const, ew

__all__ = ["broadcast_dims", "scalar_term", "tv"]


# -- shared helpers -------------------------------------------------------------------------------
def broadcast_dims(n: fx.Node, a: Analysis, operands: list[Any]) -> list:
    """Right-aligned broadcasting: each output dim is the same named dim as every operand dim
    of the same size there (size-1 operand dims broadcast)."""
    out = shape_of(n) if not isinstance(n.meta.get("val"), (list, tuple)) else None
    if out is None:
        raise ValueError("broadcast_dims on a tuple output")
    lay: list[Any] = [None] * len(out)
    for x in operands:
        if not isinstance(x, fx.Node) or a.layouts.get(x) is None:
            continue
        lx = a.layouts[x]
        sx = shape_of(x)
        off = len(out) - len(sx)
        for j, dim in enumerate(lx):
            i = off + j
            if sx[j] != out[i] or out[i] == 1:
                continue
            if lay[i] is None:
                lay[i] = list(dim)
            else:
                a.same(lay[i], dim, n)
    for i, s in enumerate(out):
        if lay[i] is None:
            lay[i] = [] if s == 1 else [a.dims.fresh(s, a.where(n))]
    return lay


def scalar_term(ctx: Lowering, n: fx.Node, key: Any, v: Any) -> Term:
    """A tensor argument's term (its dims named as the output's), or a python scalar argument
    as an exact (or lifted) constant."""
    if hasattr(v, "term") and not isinstance(v, (int, float)):
        return ctx.fit(n, n.args[key] if isinstance(key, int) else n.kwargs.get(key), v)
    s = ctx.scalar(n, key)
    return s if isinstance(s, Term) else const(s)


def tv(ctx: Lowering, n: fx.Node, t: Term) -> TV:
    return TV(t, ctx.layout(n))


def _dims_bcast(n: fx.Node, a: Analysis) -> list:
    return broadcast_dims(n, a, [x for x in n.args if isinstance(x, fx.Node)])


def _dims_forward_first(n: fx.Node, a: Analysis) -> list:
    """An activation's backward ``f_backward(g, x)``: broadcast dims with the forward tensor
    ``x`` first, so that where ``g`` and ``x`` hold twins (a square layer on the residual,
    ``h + silu(sq(h))``: the residual's gradient meets the layer's own output dim) the result
    is named as the forward value is, and the layer's weight gradient ``g^T h`` gets the
    weight's two dims rather than one twice (round 45a: r45a_15; two square layers with
    no activation between them, R31c-2, stay ambiguous)."""
    return broadcast_dims(n, a, [x for x in (*n.args[1:2], n.args[0])
                                 if isinstance(x, fx.Node)])


def _dims_first(n: fx.Node, a: Analysis) -> list:
    return a.layouts[n.args[0]]


def _mul(*xs: Term) -> Term:
    return ew(Op.MUL, *xs)


def _add(*xs: Term) -> Term:
    return ew(Op.ADD, *xs)


def _neg(x: Term) -> Term:
    return ew(Op.NEG, x)


def _one() -> Term:
    return const(Fraction(1))


def _alpha(ctx: Lowering, n: fx.Node, y: Term) -> Term:
    al = n.kwargs.get("alpha", 1)
    if al == 1:
        return y
    s = ctx.scalar(n, "alpha")
    return _mul(s if isinstance(s, Term) else const(s), y)


def _exponent(ctx: Lowering, n: fx.Node, key: Any) -> Fraction:
    e = ctx.scalar(n, key)
    if isinstance(e, Term) or not isinstance(e, Fraction):
        raise ctx.fail(n, f"exponent {n.args[key]!r} is not a rational constant")
    return e


def _symbolic(x: Any) -> bool:
    from spec_lang.torch_frontend.indexing import Affine01, Idx, Masked, Pred
    return isinstance(x, (Idx, Pred, Affine01, Masked))


# -- arithmetic -----------------------------------------------------------------------------------
@rule("aten.add.Tensor", "aten.add.Scalar")
class Add:
    """``add(x, y, alpha) = x + alpha * y``."""

    dims = staticmethod(_dims_bcast)

    @staticmethod
    def term(n, ctx, x, y, alpha=1):  # noqa: ARG004
        from spec_lang.torch_frontend.indexing import InfMask, MaskedLogits
        if isinstance(y, InfMask) and isinstance(x, TV) and n.kwargs.get("alpha", 1) == 1:
            # scores + where(mask, 0, -inf): the masked scores a softmax reads
            m = ctx.fit(n, n.args[1], TV(y.mask, y.dims))
            return MaskedLogits(ctx.fit(n, n.args[0], x), m, ctx.layout(n))
        return tv(ctx, n, _add(scalar_term(ctx, n, 0, x), _alpha(ctx, n, scalar_term(ctx, n, 1, y))))


@rule("aten.add_.Tensor", "aten.add_.Scalar")
class AddInplace(Add):
    """``x.add_(y, alpha)``: ``x`` becomes ``x + alpha * y``."""


@rule("aten.sub.Tensor", "aten.sub.Scalar")
class Sub:
    """``sub(x, y, alpha) = x - alpha * y``."""

    dims = staticmethod(_dims_bcast)

    @staticmethod
    def term(n, ctx, x, y, alpha=1):  # noqa: ARG004
        if _symbolic(x):
            from spec_lang.torch_frontend.rules_index import sub_index
            return sub_index(n, ctx, x, y)
        return tv(ctx, n, _add(scalar_term(ctx, n, 0, x),
                               _neg(_alpha(ctx, n, scalar_term(ctx, n, 1, y)))))


@rule("aten.sub_.Tensor")
class SubInplace(Sub):
    """``x.sub_(y, alpha)``: ``x`` becomes ``x - alpha * y``."""


@rule("aten.rsub.Scalar")
class RSub:
    """``rsub(x, y, alpha) = y - alpha * x``."""

    dims = staticmethod(_dims_bcast)

    @staticmethod
    def term(n, ctx, x, y, alpha=1):  # noqa: ARG004
        return tv(ctx, n, _add(scalar_term(ctx, n, 1, y),
                               _neg(_alpha(ctx, n, scalar_term(ctx, n, 0, x)))))


@rule("aten.mul.Tensor", "aten.mul.Scalar")
class Mul:
    """``mul(x, y) = x * y``."""

    dims = staticmethod(_dims_bcast)

    @staticmethod
    def term(n, ctx, x, y):
        return tv(ctx, n, _mul(scalar_term(ctx, n, 0, x), scalar_term(ctx, n, 1, y)))


@rule("aten.mul_.Tensor", "aten.mul_.Scalar")
class MulInplace(Mul):
    """``x.mul_(y)``: ``x`` becomes ``x * y``."""


@rule("aten.div.Tensor", "aten.div.Scalar")
class Div:
    """``div(x, y) = x * y^-1`` (true division only; ``y != 0`` is a stated assumption)."""

    dims = staticmethod(_dims_bcast)

    @staticmethod
    def term(n, ctx, x, y, rounding_mode=None):
        if rounding_mode is not None:
            raise ctx.fail(n, f"division with rounding_mode={rounding_mode!r}")
        den = scalar_term(ctx, n, 1, y)
        if den.op is Op.CONST and isinstance(den.attrs[0], Fraction):
            if den.attrs[0] == 0:
                raise ctx.fail(n, "division by the constant 0")
            inv = const(1 / den.attrs[0])
        else:
            inv = ew(Op.RECIP, den)
        return tv(ctx, n, _mul(scalar_term(ctx, n, 0, x), inv))


@rule("aten.div_.Tensor", "aten.div_.Scalar")
class DivInplace(Div):
    """``x.div_(y)``: ``x`` becomes ``x / y``."""


@rule("aten.neg.default")
class Neg:
    """``neg(x) = -x``."""

    dims = staticmethod(_dims_first)

    @staticmethod
    def term(n, ctx, x):
        return tv(ctx, n, _neg(x.term))


@rule("aten.pow.Tensor_Scalar")
class Pow:
    """``pow(x, e) = x^e`` for a rational constant ``e`` (``x^1 = x``)."""

    dims = staticmethod(_dims_first)

    @staticmethod
    def term(n, ctx, x, e):  # noqa: ARG004
        ex = _exponent(ctx, n, 1)
        if ex == 1:
            return tv(ctx, n, x.term)
        return tv(ctx, n, ew(Op.POW, x.term, attrs=(ex,)))


def _unary(op: Op, doc: str) -> type:
    class U:
        __doc__ = doc
        dims = staticmethod(_dims_first)

        @staticmethod
        def term(n, ctx, x):
            return tv(ctx, n, ew(op, x.term))

    return U


rule("aten.exp.default")(_unary(Op.EXP, "``exp(x) = e^x``."))
rule("aten.log.default")(_unary(Op.LOG, "``log(x)`` (natural; ``x > 0`` assumed)."))
rule("aten.sqrt.default")(_unary(Op.SQRT, "``sqrt(x)`` (``x >= 0`` assumed)."))
rule("aten.rsqrt.default")(_unary(Op.RSQRT, "``rsqrt(x) = x^(-1/2)`` (``x > 0`` assumed)."))
rule("aten.reciprocal.default")(_unary(Op.RECIP, "``reciprocal(x) = 1/x``."))
rule("aten.sigmoid.default")(_unary(Op.SIGMOID, "``sigmoid(x) = 1/(1+e^-x)``."))
rule("aten.tanh.default")(_unary(Op.TANH, "``tanh(x)``."))
rule("aten.silu.default")(_unary(Op.SILU, "``silu(x) = x * sigmoid(x)``."))


@rule("aten.silu_backward.default")
class SiluBackward:
    """``silu_backward(g, x) = g * s * (1 + x * (1 - s))`` with ``s = sigmoid(x)`` (d silu / dx)."""

    dims = staticmethod(_dims_forward_first)

    @staticmethod
    def term(n, ctx, g, x):
        gt, xt = ctx.fit(n, n.args[0], g), ctx.fit(n, n.args[1], x)
        s = ew(Op.SIGMOID, xt)
        one = _one()
        return tv(ctx, n, _mul(gt, s, _add(one, _mul(xt, _add(one, _neg(s))))))


@rule("aten.sigmoid_backward.default")
class SigmoidBackward:
    """``sigmoid_backward(g, y) = g * y * (1 - y)`` (``y`` = the forward output)."""

    dims = staticmethod(_dims_forward_first)

    @staticmethod
    def term(n, ctx, g, y):
        gt, yt = ctx.fit(n, n.args[0], g), ctx.fit(n, n.args[1], y)
        return tv(ctx, n, _mul(gt, yt, _add(_one(), _neg(yt))))


@rule("aten.tanh_backward.default")
class TanhBackward:
    """``tanh_backward(g, y) = g * (1 - y^2)`` (``y`` = the forward output)."""

    dims = staticmethod(_dims_forward_first)

    @staticmethod
    def term(n, ctx, g, y):
        gt, yt = ctx.fit(n, n.args[0], g), ctx.fit(n, n.args[1], y)
        return tv(ctx, n, _mul(gt, _add(_one(), _neg(ew(Op.POW, yt, attrs=(Fraction(2),))))))


# sqrt(2/pi) as torch's kernels hold it: kBeta = M_SQRT2 * M_2_SQRTPI * 0.5, a double, i.e. a
# binary rational (the certificate's constant grammar has no pi: proofs/exact_numbers.py)
_GELU_C = Fraction(math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5)
_GELU_K = Fraction("0.044715")


def _gelu_tanh_inner(x: Term) -> Term:
    """``sqrt(2/pi) * (x + 0.044715 x^3)``."""
    return _mul(const(_GELU_C), _add(x, _mul(const(_GELU_K), ew(Op.POW, x, attrs=(Fraction(3),)))))


@rule("aten.gelu.default")
class Gelu:
    """``gelu(x)``: exact ``x * Phi(x)`` (op GELU), or with ``approximate='tanh'``
    ``x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`` (GPT-2's ``gelu_new``)."""

    dims = staticmethod(_dims_first)

    @staticmethod
    def term(n, ctx, x, approximate="none"):
        if approximate == "none":
            return tv(ctx, n, ew(Op.GELU, x.term))
        t = ew(Op.TANH, _gelu_tanh_inner(x.term))
        return tv(ctx, n, _mul(const(Fraction(1, 2)), x.term, _add(_one(), t)))


@rule("aten.gelu_backward.default")
class GeluBackward:
    """``gelu_backward(g, x, approximate='tanh') = g * (1/2 (1 + t) + x/2 (1 - t^2) u')`` with
    ``t = tanh(u)``, ``u = sqrt(2/pi)(x + 0.044715 x^3)``, ``u' = sqrt(2/pi)(1 + 3*0.044715 x^2)``.
    The exact (erf) GELU's derivative needs the normal pdf and cdf, which the IR does not
    have: UNKNOWN."""

    dims = staticmethod(_dims_forward_first)

    @staticmethod
    def term(n, ctx, g, x, approximate="none"):
        if approximate != "tanh":
            raise ctx.fail(n, "the backward of the exact (erf) GELU (use approximate='tanh')")
        xt = ctx.fit(n, n.args[1], x)
        g = TV(ctx.fit(n, n.args[0], g), ())
        t = ew(Op.TANH, _gelu_tanh_inner(xt))
        du = _mul(const(_GELU_C), _add(_one(), _mul(const(3 * _GELU_K),
                                                    ew(Op.POW, xt, attrs=(Fraction(2),)))))
        half = const(Fraction(1, 2))
        d = _add(_mul(half, _add(_one(), t)),
                 _mul(half, xt, _add(_one(), _neg(ew(Op.POW, t, attrs=(Fraction(2),)))), du))
        return tv(ctx, n, _mul(g.term, d))


@rule("aten.maximum.default")
class Maximum:
    """``maximum(x, y)`` elementwise (forward only: its gradient is not lowered)."""

    dims = staticmethod(_dims_bcast)

    @staticmethod
    def term(n, ctx, x, y):
        return tv(ctx, n, ew(Op.MAXIMUM, scalar_term(ctx, n, 0, x), scalar_term(ctx, n, 1, y)))


@rule("aten.clamp.default", "aten.clamp_max.default", "aten.clamp_min.default")
class Clamp:
    """``clamp(x, lo, hi) = min(max(x, lo), hi)`` with ``min(a, b) = -max(-a, -b)`` (as
    ``clip_grad_norm_``'s coefficient ``min(max_norm / (norm + eps), 1)``)."""

    dims = staticmethod(_dims_first)

    @staticmethod
    def term(n, ctx, x, lo=None, hi=None):
        name = str(n.target)
        if name == "aten.clamp_max.default":
            lo, hi, klo, khi = None, lo, None, 1
        elif name == "aten.clamp_min.default":
            klo, khi = 1, None
        else:
            klo, khi = 1, 2
        t = x.term
        if lo is not None:
            t = ew(Op.MAXIMUM, t, scalar_term(ctx, n, klo, lo))
        if hi is not None:
            t = _neg(ew(Op.MAXIMUM, _neg(t), _neg(scalar_term(ctx, n, khi, hi))))
        return tv(ctx, n, t)


@rule("aten.where.self")
class Where:
    """``where(c, x, y)``: ``x`` where the 0/1 ``c`` is 1, else ``y``."""

    dims = staticmethod(_dims_bcast)

    @staticmethod
    def term(n, ctx, c, x, y):
        from spec_lang.torch_frontend.rules_index import where_index
        got = where_index(n, ctx, c, x, y)
        if got is not None:
            return got
        return tv(ctx, n, ew(Op.WHERE, as_term(c), scalar_term(ctx, n, 1, x),
                             scalar_term(ctx, n, 2, y)))


# -- identities, casts, constants -----------------------------------------------------------------
def _identity(doc: str) -> type:
    class I:  # noqa: E742
        __doc__ = doc
        dims = staticmethod(_dims_first)

        @staticmethod
        def term(n, ctx, x, *args, **kwargs):  # noqa: ARG004
            return x.relabel(ctx.layout(n))

    return I


rule("aten.clone.default")(_identity("``clone(x) = x`` (a copy)."))
rule("aten.lift_fresh_copy.default")(_identity("``lift_fresh_copy(x) = x`` (a captured "
                                                "constant)."))
rule("_c10d_functional.wait_tensor.default")(_identity(
    "``wait_tensor(x) = x`` (waits for an async collective)."))


@rule("aten._to_copy.default")
class ToCopy:
    """``_to_copy(x, dtype)``: identity over the reals between floating dtypes (the precision
    lint's business); a conversion to or from an integer or bool dtype is UNKNOWN unless it
    keeps the value (bool/int -> float of 0/1 masks and indices)."""

    dims = staticmethod(_dims_first)

    @staticmethod
    def term(n, ctx, x, **kw):
        src = n.args[0].meta["val"].dtype
        dst = kw.get("dtype", src)
        if _symbolic(x):
            from spec_lang.torch_frontend.rules_index import cast_index
            return cast_index(n, ctx, x, dst)
        if dst is not None and not dst.is_floating_point and (
                src.is_floating_point or (dst == torch.bool and src != torch.bool)):
            raise ctx.fail(n, f"a cast from {src} to {dst}")   # (to bool: R15-2)
        return tv(ctx, n, x.term)


@rule("aten.copy_.default")
class CopyInplace:
    """``dst.copy_(src)``: ``dst`` becomes ``src`` (broadcast to ``dst``'s shape)."""

    dims = staticmethod(_dims_bcast)

    @staticmethod
    def term(n, ctx, dst, src, non_blocking=False):  # noqa: ARG004
        to = n.args[0].meta["val"].dtype
        frm = n.args[1].meta["val"].dtype if isinstance(n.args[1], fx.Node) else None
        # a copy into an integer or bool tensor casts (truncates) the value: as ``_to_copy``
        # refuses it (finding R14-2: a float gradient copied through an int64 buffer)
        if frm is not None and not to.is_floating_point and to != frm and \
                (frm.is_floating_point or to == torch.bool):
            raise ctx.fail(n, f"a copy from {frm} into a {to} tensor (a cast)")
        return tv(ctx, n, ctx.fit(n, n.args[1], src))


def _fill_value(ctx: Lowering, n: fx.Node, key: Any) -> Term:
    """The value ``n`` fills with, as its output's dtype holds it: a number an integer or bool
    tensor cannot hold exactly is refused (torch truncates ``fill_(0.5)`` on int64 to 0 and
    makes ``full((), 2, dtype=bool)`` True: findings R15-1, R15-2)."""
    v = ctx.scalar(n, key)
    val = n.meta.get("val")
    dt = getattr(val, "dtype", None)
    if dt is not None and not dt.is_floating_point and not dt.is_complex:
        if isinstance(v, Term):
            raw = n.args[key] if isinstance(key, int) and key < len(n.args) else None
            if dt == torch.bool or type(raw) is not int:
                raise ctx.fail(n, f"a size-dependent value filled into a {dt} tensor (a cast)")
        else:
            fv = Fraction(v)
            ok = fv in (0, 1) if dt == torch.bool else fv.denominator == 1
            if not ok:
                raise ctx.fail(n, f"the value {v} filled into a {dt} tensor (a cast: torch "
                                  "keeps " + ("its truth value)" if dt == torch.bool
                                              else "its integer part)"))
    return v if isinstance(v, Term) else const(v)


@rule("aten.ones_like.default", "aten.zeros_like.default", "aten.full_like.default")
class FullLike:
    """``ones_like(x) = 1``, ``zeros_like(x) = 0``, ``full_like(x, v) = v`` (constant along
    every dim of ``x``)."""

    dims = staticmethod(_dims_first)

    @staticmethod
    def term(n, ctx, x, *args, **kw):  # noqa: ARG004
        name = str(n.target)
        if name == "aten.ones_like.default":
            return tv(ctx, n, const(Fraction(1)))
        if name == "aten.zeros_like.default":
            return tv(ctx, n, const(Fraction(0)))
        return tv(ctx, n, _fill_value(ctx, n, 1))


@rule("aten.scalar_tensor.default")
class ScalarTensor:
    """``scalar_tensor(v) = v``."""

    @staticmethod
    def dims(n, a):  # noqa: ARG004
        return []

    @staticmethod
    def term(n, ctx, v, **kw):  # noqa: ARG004
        if isinstance(v, float) and v == float("-inf"):
            from spec_lang.torch_frontend.indexing import NegInf
            return NegInf(ctx.layout(n))
        return tv(ctx, n, _fill_value(ctx, n, 0))


@rule("aten.full.default", "aten.zeros.default", "aten.ones.default")
class Full:
    """``full(shape, v) = v``, ``zeros(shape) = 0``, ``ones(shape) = 1`` (fresh dims); a 1-d
    ``zeros`` cut into pieces by its slices is a bucket of zeros (``buckets.zero_dims``)."""

    @staticmethod
    def dims(n, a):
        from spec_lang.torch_frontend.buckets import zero_dims
        lay = zero_dims(n, a) if str(n.target) == "aten.zeros.default" else None
        return lay if lay is not None else fresh_layout(a.dims, shape_of(n), a.where(n))

    @staticmethod
    def term(n, ctx, shape, *args, **kw):  # noqa: ARG004
        name = str(n.target)
        if ctx.analysis.marks.get(n, ("",))[0] == "bucket":   # a zeroed flat buffer (R36b-3)
            from spec_lang.torch_frontend.buckets import zero_bucket
            return zero_bucket(ctx, n, const(Fraction(0)))
        if name == "aten.ones.default" and kw.get("dtype") == torch.bool:
            from spec_lang.torch_frontend.indexing import Pred
            return Pred(const(Fraction(1)), ctx.layout(n))
        if name == "aten.zeros.default":
            return tv(ctx, n, const(Fraction(0)))
        if name == "aten.ones.default":
            return tv(ctx, n, const(Fraction(1)))
        return tv(ctx, n, _fill_value(ctx, n, 1))


@rule("aten.fill_.Scalar", "aten.zero_.default")
class FillInplace:
    """``x.fill_(v)``: ``x`` becomes ``v``; ``x.zero_()``: ``0``."""

    dims = staticmethod(_dims_first)

    @staticmethod
    def term(n, ctx, x, *args):  # noqa: ARG004
        if str(n.target) == "aten.zero_.default":
            return tv(ctx, n, const(Fraction(0)))
        return tv(ctx, n, _fill_value(ctx, n, 1))


_ = torch
