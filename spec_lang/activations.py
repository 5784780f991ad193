"""GELU and the error function, with gradients (issue 12, item 3).

GPT-2, BERT and Megatron's GPT use GELU (Hendrycks & Gimpel, "Gaussian Error Linear Units",
arXiv 1606.08415, sec. 2): ``gelu(x) = x * Phi(x)`` with ``Phi`` the standard normal CDF,
``Phi(x) = (1 + erf(x / sqrt(2))) / 2``. Two spellings are in use, and they are *different
functions* (about 1e-3 apart), so a spec and a plan must use the same one:

* ``approximate="none"`` (PyTorch's default ``F.gelu``, HF ``"gelu"``): ``x/2 (1 + erf(x/sqrt 2))``;
* ``approximate="tanh"`` (the paper's eq. in sec. 2; OpenAI GPT-2's ``gelu``, HF
  ``"gelu_new"`` / ``"gelu_pytorch_tanh"``, Megatron's ``openai_gelu``):
  ``x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``.

Both are written in primitive ops, so autodiff differentiates them with the ``TANH`` / ``ERF``
rules (``erf'(x) = 2/sqrt(pi) exp(-x^2)``, Abramowitz & Stegun 7.1.19) and the rewriting rules
treat them like any other elementwise expression (a column-parallel GELU MLP proves as SwiGLU
does). ``sqrt(2/pi)`` and ``1/sqrt(2)`` are exact constants (sympy numbers), never floats.
"""

from __future__ import annotations

from fractions import Fraction

import sympy

from spec_lang.tensor import Tensor, fail
from spec_lang.term import Op

__all__ = ["erf", "gelu", "GELU_TANH_CUBIC", "SQRT_2_OVER_PI"]

GELU_TANH_CUBIC = Fraction(44715, 10**6)
"""The cubic coefficient 0.044715 of the tanh approximation (Hendrycks & Gimpel, sec. 2)."""
SQRT_2_OVER_PI = sympy.sqrt(2) / sympy.sqrt(sympy.pi)
"""``sqrt(2/pi)``, exact (``math.sqrt(2 / math.pi)`` in a user's file reads as this too)."""
_INV_SQRT_2 = 1 / sympy.sqrt(2)


def erf(x: object) -> Tensor:
    """The error function ``erf(x) = 2/sqrt(pi) int_0^x exp(-t^2) dt``, elementwise; dims of
    ``x``. Gradient ``2/sqrt(pi) exp(-x^2)``."""
    from spec_lang.ops import _ew  # noqa: PLC0415 -- ops re-exports this module

    return _ew(Op.ERF, (x,))


def gelu(x: object, approximate: str = "none") -> Tensor:
    """GELU, PyTorch's ``F.gelu(x, approximate=...)``; dims of ``x``.

    ``approximate="none"``: ``x/2 (1 + erf(x / sqrt(2)))`` (exact). ``"tanh"``: ``x/2 (1 +
    tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` (GPT-2). Module docstring for sources.

    Raises:
        SpecError / PlanError: ``approximate`` is neither ``"none"`` nor ``"tanh"``.
    """
    from spec_lang import ops  # noqa: PLC0415

    t = ops._t(x)  # noqa: SLF001 -- the ops module's own coercion (constants, terms)
    if approximate == "none":
        inner = erf(ops.mul(t, _INV_SQRT_2))
    elif approximate == "tanh":
        cubic = ops.mul(GELU_TANH_CUBIC, ops.pow(t, 3))
        inner = ops.tanh(ops.mul(SQRT_2_OVER_PI, ops.add(t, cubic)))
    else:
        raise fail(f"gelu: approximate={approximate!r}: use 'none' (erf) or 'tanh' (GPT-2)")
    return ops.mul(ops.mul(Fraction(1, 2), t), ops.add(1, inner))
