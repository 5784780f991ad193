"""Traced leaves: exact constants, dim and axis sizes, per-rank constants, the causal mask and
the RoPE tables (public through :mod:`spec_lang.ops`).

Constants are exact (see :func:`exact`): ``int``, :class:`~fractions.Fraction`, sympy radical
sums (``1/sympy.sqrt(128)``, ``1 + sympy.sqrt(2)``: what a certificate can state,
:mod:`spec_lang.exact_numbers`), and Python floats only when their shortest decimal form is
short (``1e-5`` is ``Fraction("1e-05")``; ``0.1 + 0.2`` is rejected).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import sympy

from spec_lang.constants import exact_spelling, note_reading, read_float
from spec_lang.dims import DimLike, dim_name
from spec_lang.exact_numbers import NotCertifiable, certificate_form
from spec_lang.tensor import Tensor, current_trace, fail, user_site
from spec_lang.term import DimSpec, Op, Term, term


# A float constant is accepted when its shortest decimal form has at most this many significant
# digits: then it is the literal the user wrote (1e-5, 0.9, 3e-4), not an accident of binary.
_MAX_FLOAT_DIGITS = 10


def exact(v: Any, *, what: str = "constant") -> Any:
    """``v`` as an exact scalar: a :class:`Fraction` or a sympy radical sum.

    Raises:
        SpecError/PlanError: ``v`` is a float with a long decimal form, a non-number, a nan/inf,
            or a sympy number that is not a sum of rational multiples of rational powers of
            integers (``pi``, ``log(2)``, ``sqrt(1 + sqrt(2))``: a certificate cannot state it).
    """
    if isinstance(v, bool):
        raise fail(f"{what} {v!r} is a bool; write 0 or 1")
    if isinstance(v, int | Fraction):
        return Fraction(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise fail(f"{what} {v!r} is not a finite real")
        r = repr(v)
        mant = r.lower().split("e")[0].replace("-", "").replace(".", "").lstrip("0")
        if len(mant) > _MAX_FLOAT_DIGITS:
            reading = read_float(v)   # math.sqrt(2 / math.pi), 1 / 3: spec_lang/constants.py
            if reading is None:
                raise fail(f"{what} {v!r} is a float whose decimal form is not short and not "
                           f"a closed form; write it exactly, e.g. {exact_spelling(v)}")
            note_reading(v, reading, user_site(2))
            return reading.value
        return Fraction(r)
    if isinstance(v, sympy.Basic):
        if not v.is_number or not v.is_real or v.has(sympy.zoo, sympy.nan, sympy.oo):
            raise fail(f"{what} {v!r} is not a real number")
        if isinstance(v, sympy.Rational):
            return Fraction(int(v.p), int(v.q))
        if isinstance(v, sympy.Float):
            raise fail(f"{what} {v!r} is a sympy Float; use sympy.Rational or Fraction")
        try:
            certificate_form(v)
        except NotCertifiable as e:
            raise fail(f"{what} {v}: {e}; write it with rationals and rational powers of "
                       f"integers (sympy.sqrt(128), sympy.Rational(1, 3))") from None
        return v
    raise fail(f"{what} {v!r} (a {type(v).__name__}) is not an exact number")


def const(v: Any) -> Tensor:
    """An exact scalar constant, dims ``()`` (see :func:`exact`)."""
    return Tensor(term(Op.CONST, (), (exact(v),), ()), user_site(2))


def _t(x: object) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, Term):
        return Tensor(x, user_site(3))
    return const(x)


def dim_size(d: DimLike) -> Tensor:
    """The (global) size of dim ``d`` as a scalar, symbolic in proofs: ``|d|``."""
    return Tensor(term(Op.DIM_SIZE, (), (dim_name(d),), ()), user_site(2))


def axis_size(axis: str) -> Tensor:
    """The size of mesh axis ``axis`` (or ``"mb"``) as a scalar: ``|axis|`` (explicit plan data)."""
    return Tensor(term(Op.AXIS_SIZE, (), (str(axis),), ()), user_site(2))


def rank_const(axis: str, values: Sequence[Any]) -> Tensor:
    """A scalar equal to ``values[r]`` on coordinate ``r`` of mesh axis ``axis``.

    Raises:
        PlanError: the number of values differs from the axis size of the traced mesh.
    """
    tr = current_trace()
    vals = tuple(exact(v) for v in values)
    if tr is not None and str(axis) in tr.mesh and len(vals) != tr.mesh[str(axis)]:
        raise fail(f"rank_const over {axis!r} has {len(vals)} values but axis {axis!r} has size "
                   f"{tr.mesh[str(axis)]}; give one value per rank")
    return Tensor(term(Op.RANK_CONST, (), (str(axis), vals), ()), user_site(2))


def rank(axis: str) -> Tensor:
    """This rank's coordinate on ``axis`` (0..n-1) as a scalar (a RANK_CONST)."""
    tr = current_trace()
    if tr is None or str(axis) not in tr.mesh:
        raise fail(f"rank({axis!r}) outside a plan whose mesh has axis {axis!r}")
    return Tensor(term(Op.RANK_CONST, (), (str(axis), tuple(Fraction(i) for i in
                                                             range(tr.mesh[str(axis)]))), ()),
                  user_site(2))


def causal_mask(q: DimLike, k: DimLike) -> Tensor:
    """The 0/1 table ``[k <= q]``, dims ``(q, k)``; ``q`` and ``k`` must have equal sizes."""
    qn, kn = dim_name(q), dim_name(k)
    tr = current_trace()
    if tr is not None and qn in tr.sizes and kn in tr.sizes and tr.sizes[qn] != tr.sizes[kn]:
        raise fail(f"causal_mask({qn}, {kn}): sizes {tr.sizes[qn]} and {tr.sizes[kn]} differ")
    return Tensor(term(Op.CAUSAL_MASK, (), (qn, kn), (DimSpec(qn), DimSpec(kn))), user_site(2))


def _rope_table(op: Op, seq: DimLike, half: DimLike, theta: Any) -> Tensor:
    s, h = dim_name(seq), dim_name(half)
    return Tensor(term(op, (), (s, h, exact(theta, what="rope theta")), (DimSpec(s), DimSpec(h))),
                  user_site(3))


def rope_cos(seq: DimLike, half: DimLike, theta: Any) -> Tensor:
    """``cos(pos_s * theta^(-i/|half|))``, dims ``(seq, half)``; ``half`` = head dim / 2."""
    return _rope_table(Op.ROPE_COS, seq, half, theta)


def rope_sin(seq: DimLike, half: DimLike, theta: Any) -> Tensor:
    """``sin(pos_s * theta^(-i/|half|))``, dims ``(seq, half)``."""
    return _rope_table(Op.ROPE_SIN, seq, half, theta)
