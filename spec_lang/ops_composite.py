"""Composite ops written in the primitives (public through :mod:`spec_lang.ops`): softmax and
log-softmax, logsumexp, RMSNorm and LayerNorm, RoPE, embedding gather and cross-entropy.
They add no op to :class:`spec_lang.term.Op`, so they need no rewrite rule of their own.
"""

from __future__ import annotations

from typing import Any

from spec_lang.dims import Dim, DimLike, dim_name
from spec_lang.ops_constants import _t, rope_cos, rope_sin
# max and sum are the DSL's reductions here, as in spec_lang.ops (not the builtins)
from spec_lang.ops_contraction import einsum, max, mean, one_hot, sum  # noqa: A004
from spec_lang.ops_elementwise import add, div, exp, log, mul, rsqrt, stop_gradient, sub
from spec_lang.ops_movement import chunk, concat, rename
from spec_lang.tensor import Tensor, fail


def logsumexp(x: object, d: DimLike) -> Tensor:
    """``log(sum_d exp(x))`` computed as ``m + log(sum_d exp(x - m))``, ``m = stop_gradient(max_d x)``.

    Exact over the reals in value *and* gradient: the expression equals ``log sum exp x`` for
    every ``m`` (the ``m`` terms cancel), so its derivative in ``m`` is zero and treating ``m``
    as a constant (stop_gradient) gives the exact derivative in ``x``.
    """
    t = _t(x)
    m = stop_gradient(max(t, d))
    return add(m, log(sum(exp(sub(t, m)), d)))


def softmax(x: object, d: DimLike, *, mask: object | None = None) -> Tensor:
    """``p = e / sum_d e`` with ``e = exp(x - m) * mask``, ``m = stop_gradient(max_d x)``.

    ``mask`` is a 0/1 table (e.g. :func:`causal_mask`) applied multiplicatively on ``exp``: a
    masked entry gets probability exactly 0, with no ``-inf``. The shift ``m`` cancels between
    numerator and denominator, so value and gradient are exact over the reals (see logsumexp).
    dims: those of ``x`` (and of ``mask``).
    """
    t = _t(x)
    m = stop_gradient(max(t, d))
    e = exp(sub(t, m))
    if mask is not None:
        e = mul(e, mask)
    return div(e, sum(e, d))


def log_softmax(x: object, d: DimLike) -> Tensor:
    """``x - logsumexp_d(x)`` (max-shifted, exact; see :func:`logsumexp`)."""
    return sub(x, logsumexp(x, d))


def rms_norm(x: object, w: object, d: DimLike, eps: Any) -> Tensor:
    """``x * rsqrt(mean_d(x^2) + eps) * w``; x: (..., d), w: (d,). ``eps``: an exact constant
    or a scalar tensor (e.g. a ``rank_const``)."""
    t = _t(x)
    ms = mean(mul(t, t), d)
    return mul(mul(t, rsqrt(add(ms, _t(eps)))), w)


def layer_norm(x: object, w: object, b: object, d: DimLike, eps: Any) -> Tensor:
    """``(x - mean_d x) * rsqrt(var_d x + eps) * w + b``; x: (..., d), w, b: (d,)."""
    t = _t(x)
    c = sub(t, mean(t, d))
    var = mean(mul(c, c), d)
    return add(mul(mul(c, rsqrt(add(var, _t(eps)))), w), b)


def rope(x: object, seq: DimLike, head: DimLike, half: Dim, theta: Any) -> Tensor:
    """Rotary embedding, rotate-half form (as Llama/HF): with ``x = [x1, x2]`` split along ``head``,
    ``out = [x1*cos - x2*sin, x2*cos + x1*sin]``, ``cos, sin = rope_cos/sin(seq, half, theta)``.

    x: (..., seq, head); ``half`` is the dim of size ``|head|/2``; returns x's dims.
    """
    t = _t(x)
    hn = dim_name(head)
    x1 = rename(chunk(t, hn, 2, 0), hn, half)
    x2 = rename(chunk(t, hn, 2, 1), hn, half)
    c, s = rope_cos(seq, half, theta), rope_sin(seq, half, theta)
    o1 = sub(mul(x1, c), mul(x2, s))
    o2 = add(mul(x2, c), mul(x1, s))
    return concat([rename(o1, half, hn, block=(0, 2)), rename(o2, half, hn, block=(1, 2))], hn)


def embedding(tokens: object, table: object, vocab: DimLike) -> Tensor:
    """Gather rows: ``einsum(one_hot(tokens, V), table)``; tokens: (B, S), table: (V, H) ->
    (B, S, H). If ``table``'s ``V`` is sharded, the one-hot is the rank's block (masked lookup)."""
    tk, tb = _t(tokens), _t(table)
    v = dim_name(vocab)
    if v not in tb.dims:
        raise fail(f"embedding: table {tb.describe()} has no vocab dim {v}")
    oh = one_hot(tk, v, shards=tb.term.dim(v).shards)
    out = tk.dims + tuple(d for d in tb.dims if d != v)
    return einsum(oh, tb, out=out)


def cross_entropy_per_token(logits: object, labels: object, vocab: DimLike, *,
                            label_smoothing: Any = None) -> Tensor:
    """``ce = logsumexp_V(logits) - logits[label]``; logits: (..., V), labels: (...) -> (...).

    With ``label_smoothing=a`` (an exact constant or a scalar tensor, e.g. written with
    ``dim_size``): ``(1 - a) * ce - a * mean_V(log_softmax_V(logits))``, PyTorch's
    ``F.cross_entropy(..., label_smoothing=a)`` (the target mixed with the uniform distribution:
    ``q = (1 - a) onehot + a / |V|``). ``mean_V`` uses the *global* ``|V|``, so on V-sharded
    logits it is the rank's addend (reduce it over the vocab-parallel axis). Megatron's
    ``vocab_parallel_cross_entropy`` passes ``a = smoothing * |V| / (|V| - 1)``.
    """
    lg, lb = _t(logits), _t(labels)
    v = dim_name(vocab)
    picked = einsum(lg, one_hot(lb, v, shards=lg.term.dim(v).shards), out=lb.dims)
    ce = sub(logsumexp(lg, v), picked)
    if label_smoothing is None:
        return ce
    a = _t(label_smoothing)
    return sub(mul(sub(1, a), ce), mul(a, mean(log_softmax(lg, v), v)))


def cross_entropy(logits: object, labels: object, mask: object, vocab: DimLike) -> Tensor:
    """Masked token mean ``sum(mask * ce) / sum(mask)`` (scalar). The mask carries the ignore
    index: a token whose label is ignored has mask 0."""
    ce = cross_entropy_per_token(logits, labels, vocab)
    m = _t(mask)
    return div(sum(mul(m, ce)), sum(m))
