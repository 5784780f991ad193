"""Traced elementwise ops (public through :mod:`spec_lang.ops`).

Dims are matched by *name*: an operand lacking a dim is constant along it (broadcast), and
operands that share a dim must agree on its placement (the mesh axes that shard it), else the
error names both tensors and says what to change. ``cast`` keeps its dtype for the precision
lint (``proofs/precision.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from spec_lang.ops_constants import _t, exact
from spec_lang.tensor import Tensor, fail, user_site
from spec_lang.term import DimSpec, Op, Term, term


def _merge_dims(xs: Sequence[Tensor], what: str) -> tuple[DimSpec, ...]:
    """Union of the operands' dims in order of first appearance; shared dims must agree."""
    out: dict[str, tuple[DimSpec, Tensor]] = {}
    for x in xs:
        for d in x.term.dims:
            prev = out.get(d.name)
            if prev is None:
                out[d.name] = (d, x)
            elif prev[0] != d:
                raise fail(
                    f"{what}: dim {d.name} is placed as {prev[0]} in {prev[1].describe()} but as "
                    f"{d} in {x.describe()}; operands sharing a dim must shard it over the same "
                    f"mesh axes (insert an all_gather / shard one side, or rename one dim)")
    return tuple(v[0] for v in out.values())


def _ew(op: Op, xs: Sequence[object], attrs: tuple = (), what: str | None = None) -> Tensor:
    ts = [_t(x) for x in xs]
    dims = _merge_dims(ts, what or op.name.lower())
    return Tensor(term(op, tuple(x.term for x in ts), attrs, dims), user_site(3))


def add(a: object, b: object) -> Tensor:
    """``a + b``, broadcast by dim name. dims: union of both."""
    return _ew(Op.ADD, (a, b), what="add")


def sub(a: object, b: object) -> Tensor:
    """``a - b`` = ``ADD(a, NEG(b))``."""
    return _ew(Op.ADD, (a, neg(b)), what="sub")


def mul(a: object, b: object) -> Tensor:
    """``a * b``, broadcast by dim name."""
    return _ew(Op.MUL, (a, b), what="mul")


def div(a: object, b: object) -> Tensor:
    """``a / b`` = ``MUL(a, RECIP(b))``; a constant divisor becomes the exact constant ``1/b``."""
    if not isinstance(b, Tensor | Term):
        v = exact(b, what="divisor")
        if v == 0:
            raise fail(f"division by the constant {b!r}")
        return _ew(Op.MUL, (a, _t(1 / v if isinstance(v, Fraction) else 1 / v)), what="div")
    return _ew(Op.MUL, (a, recip(b)), what="div")


def neg(x: object) -> Tensor:
    """``-x``."""
    return _ew(Op.NEG, (x,))


def recip(x: object) -> Tensor:
    """``1/x`` (``x != 0`` is an assumption the prover records)."""
    return _ew(Op.RECIP, (x,))


def pow(x: object, e: Any) -> Tensor:  # noqa: A001 -- the field's name
    """``x ** e`` with an exact rational exponent ``e``."""
    ev = exact(e, what="exponent")
    if not isinstance(ev, Fraction):
        raise fail(f"exponent {e!r} must be rational")
    return _ew(Op.POW, (x,), (ev,))


def exp(x: object) -> Tensor:
    """``e^x``."""
    return _ew(Op.EXP, (x,))


def log(x: object) -> Tensor:
    """Natural log (``x > 0`` assumed)."""
    return _ew(Op.LOG, (x,))


def sqrt(x: object) -> Tensor:
    """``sqrt(x)`` (``x >= 0`` assumed)."""
    return _ew(Op.SQRT, (x,))


def rsqrt(x: object) -> Tensor:
    """``1/sqrt(x)`` (``x > 0`` assumed)."""
    return _ew(Op.RSQRT, (x,))


def sigmoid(x: object) -> Tensor:
    """``1/(1+e^-x)``."""
    return _ew(Op.SIGMOID, (x,))


def silu(x: object) -> Tensor:
    """``x * sigmoid(x)``."""
    return _ew(Op.SILU, (x,))


def tanh(x: object) -> Tensor:
    """``tanh(x)``."""
    return _ew(Op.TANH, (x,))


def maximum(a: object, b: object) -> Tensor:
    """Elementwise ``max(a, b)``; forward only (differentiate through ``stop_gradient``)."""
    return _ew(Op.MAXIMUM, (a, b))


def where(cond: object, a: object, b: object) -> Tensor:
    """``a`` where ``cond`` (0/1) is 1, else ``b``."""
    return _ew(Op.WHERE, (cond, a, b))


FLOAT_DTYPES = ("fp64", "float64", "double", "fp32", "float32", "float", "tf32", "bf16",
                "bfloat16", "fp16", "float16", "half", "fp8", "fp8_e4m3", "fp8_e5m2",
                "float8_e4m3fn", "float8_e5m2")
"""dtype names ``cast`` / ``all_reduce(dtype=)`` / ``microbatches(accum_dtype=)`` accept (case
insensitive, optional ``torch.`` prefix); the precision lint (``proofs/precision.py``) ranks
them."""


def check_dtype(dtype: object, what: str = "dtype") -> str:
    """``dtype`` as given (a string) if it names a floating dtype of :data:`FLOAT_DTYPES`.

    Raises:
        SpecError / PlanError: ``file:line: unknown dtype ...; valid: ...`` (one line).
    """
    if not isinstance(dtype, str) or \
            dtype.lower().removeprefix("torch.") not in FLOAT_DTYPES:
        raise fail(f"{what} {dtype!r} is not a known floating dtype; valid: "
                   f"{', '.join(FLOAT_DTYPES)}", site=user_site(3))
    return dtype


def cast(x: object, dtype: str) -> Tensor:
    """Identity over the reals; ``dtype`` (``"bf16"``, ``"fp32"``...) is kept for the precision lint.

    Raises:
        SpecError / PlanError: ``dtype`` not in :data:`FLOAT_DTYPES`.
    """
    return _ew(Op.CAST, (x,), (check_dtype(dtype),))


def stop_gradient(x: object) -> Tensor:
    """Identity forward, zero gradient."""
    return _ew(Op.STOP_GRAD, (x,))
