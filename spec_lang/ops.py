"""Traced ops: each builds a term and checks shapes at trace time; nothing is computed.

Dims are matched by *name*. Elementwise ops broadcast by name (an operand lacking a dim is
constant along it); operands that share a dim must agree on its placement (the mesh axes that
shard it), else the error names both tensors and says what to change. ``einsum`` contracts
every dim not in ``out``.

Constants are exact (see :func:`const`): ``int``, :class:`~fractions.Fraction`, sympy radical
sums (``1/sympy.sqrt(128)``, ``1 + sympy.sqrt(2)``: what a certificate can state,
:mod:`spec_lang.exact_numbers`), and Python floats only when their shortest decimal form is
short (``1e-5`` is ``Fraction("1e-05")``; ``0.1 + 0.2`` is rejected).

The op set itself is :class:`spec_lang.term.Op` (re-exported here with its groups).

This module is the public face (``from spec_lang import ops``; ``ops.add``): the ops are defined
by concept in ``ops_constants`` (constants and leaves), ``ops_elementwise``,
``ops_contraction`` (einsum and reductions), ``ops_movement`` and ``ops_composite``, and
re-exported here with the activations (:mod:`spec_lang.activations`) and dropout
(:mod:`spec_lang.rng`).
"""

from __future__ import annotations

from spec_lang.ops_composite import (  # noqa: F401
    cross_entropy, cross_entropy_per_token, embedding, layer_norm, log_softmax, logsumexp,
    rms_norm, rope, softmax,
)
from spec_lang.ops_constants import (  # noqa: F401
    _MAX_FLOAT_DIGITS, _rope_table, _t, axis_size, causal_mask, const, dim_size, exact, rank,
    rank_const, rope_cos, rope_sin,
)
# max, pow and sum are the DSL's ops here (ops.max, ops.sum), not the builtins
from spec_lang.ops_contraction import (  # noqa: F401,A004
    _check_single_sums, _dims_arg, einsum, matmul, max, mean, one_hot, sum, topk_mask,
)
from spec_lang.ops_elementwise import (  # noqa: F401,A004
    FLOAT_DTYPES, _ew, _merge_dims, add, cast, check_dtype, div, exp, log, maximum, mul, neg, pow,
    recip, rsqrt, sigmoid, silu, sqrt, stop_gradient, sub, tanh, where,
)
from spec_lang.ops_movement import (  # noqa: F401
    _local_size, chunk, chunks, concat, rename, transpose,
)
from spec_lang.tensor import Tensor, current_trace, user_site
from spec_lang.term import COLLECTIVE, ELEMENTWISE, LEAF, Op  # noqa: F401

__all__ = [
    # op set
    "Op", "ELEMENTWISE", "REDUCE", "MOVEMENT", "COLLECTIVE", "LEAF",
    # constants and leaves
    "const", "exact", "dim_size", "axis_size", "rank_const", "rank", "causal_mask", "rope_cos",
    "rope_sin",
    # elementwise
    "add", "sub", "mul", "div", "neg", "recip", "pow", "exp", "log", "sqrt", "rsqrt", "sigmoid",
    "silu", "tanh", "gelu", "erf", "maximum", "where", "cast", "stop_gradient",
    # contraction and reduction
    "einsum", "matmul", "sum", "mean", "max", "one_hot", "topk_mask",
    # movement
    "rename", "transpose", "chunk", "chunks", "concat",
    # composite (written in the ops above)
    "softmax", "log_softmax", "logsumexp", "rms_norm", "layer_norm", "rope", "embedding",
    "cross_entropy_per_token", "cross_entropy",
    # obligation cutting
    "layer_boundary",
]

REDUCE = frozenset({Op.EINSUM, Op.REDUCE_MAX})
MOVEMENT = frozenset({Op.RENAME, Op.CHUNK, Op.CONCAT})


# -- obligation cutting ----------------------------------------------------------------------------
def layer_boundary(x: Tensor, name: str) -> Tensor:
    """Mark ``x`` (the residual stream, e.g. ``(B, S, H)``) as the value at layer boundary ``name``.

    Returns ``x`` itself (same term: the mark changes no value). The current trace records
    ``(name, term, site)``; when the spec and the plan both mark ``name``, the prover may cut its
    obligations there (``docs/verifier-internals.md``, "Obligation cutting"): it proves each layer
    once as a lemma over a fresh input and reuses the proof for every identical layer. A mark
    outside a trace does nothing. Convention: ``f"layers.{i}"`` before block ``i`` and
    ``f"layers.{L}"`` after the last block.

    Raises:
        TypeError: ``x`` is not a Tensor or ``name`` not a string.
    """
    if not isinstance(x, Tensor) or not isinstance(name, str):
        raise TypeError(f"{user_site(2)}: layer_boundary(x, name) needs a Tensor and a str")
    ctx = current_trace()
    if ctx is not None:
        ctx.boundaries.append((name, x.term, user_site(2)))
    return x


# -- GELU and erf (spec_lang/activations.py): ops.gelu(x, approximate="tanh") ---------------------
from spec_lang.activations import erf, gelu  # noqa: E402,F401

# -- randomness (spec_lang/rng.py): ops.dropout(x, p, rng=RngStream(...)) ---------------------------
from spec_lang.rng import RngStream, dropout, model_parallel_rng  # noqa: E402,F401
