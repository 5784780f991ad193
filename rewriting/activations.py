"""Activation functions that are products of other ops: one normal form for each spelling.

``SILU(x) = x * SIGMOID(x)`` (Elfwing et al. 2018, eq. 5; PyTorch's ``F.silu``) and the exact
``GELU(x) = x/2 (1 + ERF(x / sqrt 2))`` (Hendrycks & Gimpel 2016, sec. 2; the op a front end
lowers ``aten.gelu`` to) are written out, so ``ops.silu(x)`` and ``x * ops.sigmoid(x)``, or a
``GELU`` node and ``ops.gelu(x)``, reach one normal form. The gradients that autodiff builds for
the two spellings are then equal polynomials in ``x`` and ``SIGMOID(x)`` / ``ERF(...)`` /
``EXP(...)``, which the prover's exact ``cas`` step decides (``rewriting/spellings.py``).
"""

from __future__ import annotations

import sympy

from spec_lang.term import Binding, Op, Term

from rewriting import build as b
from rewriting.instances import draw_binding, draw_dims, fresh
from rewriting.rule import Draw, Rule, always, register

__all__: list[str] = []

_INV_SQRT_2 = 1 / sympy.sqrt(2)


def _rule(name: str, law: str, op: Op, rhs) -> Rule:
    def sample(draw: Draw) -> tuple[Term, Binding]:
        return b.unary(op, fresh(draw_dims(draw))), draw_binding(draw)

    return register(Rule(name, law, "", frozenset({op}),
                         lambda t, bd: {"x": t.args[0]}, lambda s: b.unary(op, s["x"]),
                         lambda s, bd: rhs(s["x"]), always, sample, group="canonical"))


# SiLU / swish is x times its sigmoid
_rule("silu-def", "SILU(x) = MUL(x, SIGMOID(x))", Op.SILU,
      lambda x: b.mul(x, b.unary(Op.SIGMOID, x)))

# exact GELU is x times the normal CDF, Phi(x) = (1 + erf(x / sqrt 2)) / 2
_rule("gelu-def", "GELU(x) = MUL(CONST(1/2), x, ADD(CONST(1), ERF(MUL(CONST(1/sqrt 2), x))))",
      Op.GELU, lambda x: b.mul(b.const(sympy.Rational(1, 2)), x,
                               b.add(b.const(1), b.unary(Op.ERF, b.mul(b.const(_INV_SQRT_2),
                                                                       x)))))
