"""Positions as data: RoPE from integer position ids, packed sequences from ``cu_seqlens``.

Written in existing ops (``one_hot``, ``einsum``, ``causal_mask``, ``maximum``, the RoPE
tables), so spec and plan share their terms and the rewriting needs no new rule.

* :func:`rope_at` is RoPE (rotate-half, as :func:`spec_lang.ops.rope`) whose angle is
  ``pos[b, s] * theta^(-i/|half|)`` for integer position ids ``pos`` given as data
  (``index(B, S, range=P)``): the tables are gathered by the ids,
  ``cos_at = einsum(one_hot(pos, P), rope_cos(P, half, theta))``, so shifted, reset (packed) or
  wrong ids are expressible (HF ``position_ids``, Megatron's ``packed_seq_params``).
* Packed sequences (FlashAttention's ``cu_seqlens``): several sequences share one row of
  ``S`` positions; attention stays inside a sequence and positions restart at each start. The
  data are the *starts* of the second, third, ... sequences, ``starts = cu_seqlens[1:-1]``
  (``index(B, J, range=S)``). With ``seg(s) = #{j : starts_j <= s}`` (a count, so unsorted or
  repeated starts are harmless):

  * :func:`packed_causal_mask`: ``[t <= s] * [seg(s) = seg(t)]``, i.e. ``[t <= s]`` times
    ``max(0, 1 - (seg(s) - seg(t)))`` (``seg`` is non-decreasing, so ``seg(s) - seg(t)`` is a
    non-negative integer for ``t <= s``);
  * :func:`packed_positions`: ``s - start(s)`` with ``start(s) = max_j starts_j [starts_j <=
    s]`` (0 for the first sequence): the position ids to feed :func:`rope_at`.

All of them are data transforms (no gradient flows into the ids).
"""

from __future__ import annotations

from typing import Any

from spec_lang.dims import Dim, DimLike, dim_name
from spec_lang.ops import (
    add, causal_mask, chunk, concat, const, einsum, max as reduce_max, maximum, mul, one_hot,
    rename, rope_cos, rope_sin, stop_gradient, sub, sum as reduce_sum,
)
from spec_lang.tensor import Tensor, fail, user_site

__all__ = ["rope_at", "rope_tables_at", "segment_ids", "packed_causal_mask", "packed_positions",
           "position_index"]


def rope_tables_at(positions: Tensor, table: DimLike, half: DimLike, theta: Any
                   ) -> tuple[Tensor, Tensor]:
    """``(cos, sin)`` at integer ``positions`` (dims ``D...``, values in ``[0, |table|)``):
    dims ``D... + (half,)``; ``table`` is the dim of the table's positions (``P``)."""
    p, h = dim_name(table), dim_name(half)
    oh = one_hot(positions, p)
    out = tuple(positions.dims) + (h,)
    return (einsum(oh, rope_cos(p, h, theta), out=out),
            einsum(oh, rope_sin(p, h, theta), out=out))


def rope_at(x: Tensor, positions: Tensor, table: DimLike, head: DimLike, half: Dim,
            theta: Any) -> Tensor:
    """Rotate-half RoPE of ``x`` at position ids ``positions`` (module docstring).

    x: ``(..., head)`` with every dim of ``positions``; positions: integer ids (e.g. ``(B, S)``)
    in ``[0, |table|)``; ``half``: the dim of size ``|head|/2``. Returns ``x``'s dims.

    Raises:
        SpecError / PlanError: ``x`` lacks a dim of ``positions``.
    """
    missing = [d for d in positions.dims if d not in x.dims]
    if missing:
        raise fail(f"rope_at: {x.describe()} lacks the position ids' dims {missing}",
                   site=user_site(2))
    hn = dim_name(head)
    c, s = rope_tables_at(positions, table, half, theta)
    x1 = rename(chunk(x, hn, 2, 0), hn, half)
    x2 = rename(chunk(x, hn, 2, 1), hn, half)
    o1 = sub(mul(x1, c), mul(x2, s))
    o2 = add(mul(x2, c), mul(x1, s))
    return concat([rename(o1, half, hn, block=(0, 2)), rename(o2, half, hn, block=(1, 2))], hn)


def position_index(seq: DimLike, other: DimLike) -> Tensor:
    """The integer ``s`` along ``seq`` as a tensor of dims ``(seq,)``:
    ``sum_other [other <= seq] - 1`` (``other`` is a dim of ``seq``'s size)."""
    return sub(reduce_sum(causal_mask(seq, other), other), const(1))


def segment_ids(starts: Tensor, seq: DimLike, entries: DimLike) -> Tensor:
    """``seg(s) = #{j : starts_j <= s}``: dims ``starts.dims - entries + (seq,)``.

    starts: ``(..., J)`` integer positions in ``[0, |seq|)`` (``cu_seqlens[1:-1]``); ``entries``
    is ``J``. Uses a fresh dim ``<seq>_k`` of ``seq``'s size for the one-hot.
    """
    sq, j = dim_name(seq), dim_name(entries)
    k = Dim(f"{sq}_k", _size(seq))
    le = causal_mask(sq, k)                                   # [k <= s]
    oh = one_hot(starts, k)                                   # [starts_j == k]
    out = tuple(d for d in starts.dims if d != j) + (sq,)
    return stop_gradient(einsum(oh, le, out=out, sum_single=(j,)))   # counts over entries J


def _size(d: DimLike) -> int:
    from spec_lang.tensor import current_trace
    if isinstance(d, Dim):
        return d.size
    tr = current_trace()
    if tr is None or d not in tr.sizes:
        raise fail(f"size of dim {d!r} is unknown here; pass the Dim", site=user_site(3))
    return tr.sizes[d]


def packed_causal_mask(starts: Tensor, seq: DimLike, key: DimLike, entries: DimLike) -> Tensor:
    """The 0/1 attention mask of packed sequences: ``[t <= s][seg(s) = seg(t)]``, dims
    ``starts.dims - entries + (seq, key)`` (module docstring); ``key`` is the keys' dim (same
    size as ``seq``)."""
    sq, kn = dim_name(seq), dim_name(key)
    seg_s = segment_ids(starts, seq, entries)
    seg_t = rename(seg_s, sq, kn)
    same = maximum(const(0), sub(const(1), sub(seg_s, seg_t)))
    return stop_gradient(mul(causal_mask(sq, kn), same))


def packed_positions(starts: Tensor, seq: DimLike, entries: DimLike) -> Tensor:
    """Position ids restarting at every sequence start: ``s - max_j starts_j [starts_j <= s]``,
    dims ``starts.dims - entries + (seq,)`` (module docstring)."""
    sq, j = dim_name(seq), dim_name(entries)
    k = Dim(f"{sq}_k", _size(seq))
    s_idx = position_index(sq, k)
    le = einsum(one_hot(starts, k), causal_mask(sq, k), out=tuple(starts.dims) + (sq,))
    start = reduce_max(mul(starts, le), j)                    # 0 when no start is <= s
    return stop_gradient(sub(s_idx, start))
