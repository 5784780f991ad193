"""Context parallelism (CP): the load-balanced sequence chunk map, next-token labels, CP RoPE.

Megatron-LM / TransformerEngine context parallelism with load balancing (Megatron-LM
``get_batch_on_this_cp_rank``; TE ``cp_comm_type``): the sequence dim ``S`` is cut into
``2 cp`` equal chunks and CP rank ``c`` holds chunks ``c`` and ``2 cp - 1 - c``, so every rank
gets the same amount of causal-attention work. Here that map is *symbolic*:

* ``PERMUTE(x, S, order)`` (``Op.PERMUTE``) reorders the ``len(order)`` blocks of ``S``:
  block ``j`` of the result is block ``order[j]`` of ``x``. With
  ``order = load_balanced_order(cp) = (0, 2cp-1, 1, 2cp-2, ...)`` followed by ``Shard(S)`` over
  ``cp``, rank ``c`` holds exactly chunks ``c`` and ``2cp-1-c``. It is a term with evaluator
  semantics (float64 reference in ``spec_lang/evaluate.py``) and rewrite rules
  (``rewriting/permute.py``), never a constant 0/1 matrix.
* :func:`cp_split` applies the same map to any data (tokens, labels, masks) or table (RoPE
  cos/sin, the causal mask) that has ``S``: one index map for everything (CASES.md B33).
* ``SHIFT(x, S)`` (``Op.SHIFT``): next-token targets *in global order*,
  ``y[i] = x[i+1]`` for ``i < |S|-1`` and ``y[|S|-1] = 0``. It is a data transform
  (no gradient rule).

Padding and packing are masks: a sequence whose length is not a multiple of ``2 cp`` is padded
to one with mask 0 at the pad positions; with packing, ``cont[i] = 1`` iff token ``i`` continues
the sequence of token ``i - 1`` (0 at each sequence start and at padding), and the loss weight
of position ``i`` is ``shift(cont)[i]``: 0 at the last position of every packed sequence, at the
global last position and at padding (:func:`next_token_weights`).
"""

from __future__ import annotations

from spec_lang.dims import Dim, DimLike, dim_name
from spec_lang.ops import _t, causal_mask, rope_cos, rope_sin
from spec_lang import ops
from spec_lang.tensor import Tensor, current_trace, fail, user_site
from spec_lang.term import Axis, DimSpec, Op, term

__all__ = ["load_balanced_order", "permute", "load_balance", "shift", "cp_split",
           "next_token_labels", "next_token_weights", "cp_rope_tables", "rope_with_tables",
           "cp_causal_mask"]


def load_balanced_order(cp: int) -> tuple[int, ...]:
    """Block order for ``cp`` ranks: ``(0, 2cp-1, 1, 2cp-2, ..., cp-1, cp)``.

    After ``PERMUTE`` with this order and ``Shard(S)`` over ``cp``, rank ``c`` holds chunks
    ``c`` and ``2cp - 1 - c`` of ``2 cp`` (Megatron-LM ``get_batch_on_this_cp_rank``).

    Raises:
        PlanError/SpecError: ``cp`` is not a positive integer.
    """
    if not isinstance(cp, int) or isinstance(cp, bool) or cp < 1:
        raise fail(f"load_balanced_order(cp={cp!r}): cp must be a positive integer")
    out: list[int] = []
    for c in range(cp):
        out += [c, 2 * cp - 1 - c]
    return tuple(out)


def _size(name: str) -> int | None:
    tr = current_trace()
    return None if tr is None else tr.sizes.get(name)


def permute(x: object, d: DimLike, order: tuple[int, ...] | list[int]) -> Tensor:
    """Reorder the ``len(order)`` equal blocks of ``x`` along ``d``: block ``j`` of the result is
    block ``order[j]`` of ``x``. Dims unchanged. ``d`` must be unsharded in ``x``.

    Raises:
        PlanError/SpecError: ``order`` is not a permutation of ``0..n-1``; ``x`` lacks ``d``;
        ``d`` is sharded; ``|d|`` is not a multiple of ``len(order)`` (pad ``d`` with mask 0).
    """
    t = _t(x)
    n = dim_name(d)
    o = tuple(order)
    if not o or not all(isinstance(j, int) and not isinstance(j, bool) for j in o) \
            or sorted(o) != list(range(len(o))):
        raise fail(f"permute along {n}: order {o!r} is not a permutation of 0..{len(o) - 1}")
    if n not in t.dims:
        raise fail(f"permute: {t.describe()} has no dim {n}")
    if t.term.dim(n).shards:
        raise fail(f"permute along {n}: {t.describe()} is already sharded along {n}; permute "
                   f"the full sequence, then shard it")
    size = _size(n)
    if size is not None and size % len(o):
        raise fail(f"permute along {n}: |{n}| = {size} is not a multiple of {len(o)} chunks; "
                   f"pad {n} to a multiple of {len(o)} and mask the padding (mask 0)")
    return Tensor(term(Op.PERMUTE, (t.term,), (n, o), t.term.dims), user_site(2))


def _axis(axis: str) -> int:
    tr = current_trace()
    if tr is None or str(axis) not in tr.mesh:
        raise fail(f"context parallelism over {str(axis)!r} outside a plan whose mesh has it")
    return tr.mesh[str(axis)]


def load_balance(x: object, d: DimLike, axis: str = Axis.CP) -> Tensor:
    """``permute(x, d, load_balanced_order(|axis|))`` (the full sequence, reordered so that a
    contiguous ``Shard(d)`` over ``axis`` gives rank ``c`` chunks ``c`` and ``2|axis|-1-c``)."""
    return permute(x, d, load_balanced_order(_axis(axis)))


def shift(x: object, d: DimLike) -> Tensor:
    """Next position along ``d``: ``y[i] = x[i+1]`` (``i < |d|-1``), ``y[|d|-1] = 0``.

    A data transform in *global* order (no gradient rule). ``d`` must be unsharded.

    Raises:
        PlanError/SpecError: ``x`` lacks ``d``.
    """
    t = _t(x)
    n = dim_name(d)
    if n not in t.dims:
        raise fail(f"shift: {t.describe()} has no dim {n}")
    return Tensor(term(Op.SHIFT, (t.term,), (n,), t.term.dims), user_site(2))


def next_token_labels(tokens: object, d: DimLike) -> Tensor:
    """Targets ``t_i = x_{i+1}`` in global order (the last position gets 0 and weight 0)."""
    return shift(tokens, d)


def next_token_weights(cont: object, d: DimLike) -> Tensor:
    """Loss weight of position ``i``: ``cont[i+1]`` (1 iff token ``i+1`` continues token ``i``'s
    sequence): 0 at the last position of every packed sequence, at the end and at padding."""
    return shift(cont, d)


def cp_split(x: object, d: DimLike, axis: str = Axis.CP) -> Tensor:
    """This CP rank's tokens of ``x``: ``SHARD(load_balance(x, d), d, axis)`` (the rank holds
    chunks ``c`` and ``2|axis|-1-c`` of ``2|axis|``). For data and constant tables only (a
    plain split: no backward).

    Raises:
        PlanError: ``x`` already varies over ``axis`` or ``|d|`` is not a multiple of
        ``2|axis|`` (pad ``d`` and mask the padding).
    """
    t = load_balance(x, d, axis)
    n, a = dim_name(d), str(axis)
    from spec_lang.term import varying_axes
    if a in varying_axes(t.term):
        raise fail(f"cp_split over {a!r}: {t.describe()} already varies over {a!r}")
    dims = tuple(DimSpec(s.name, s.shards + (a,)) if s.name == n else s for s in t.term.dims)
    return Tensor(term(Op.SHARD, (t.term,), (n, a), dims), user_site(2))


def cp_rope_tables(seq: DimLike, half: Dim, theta: object, axis: str = Axis.CP
                   ) -> tuple[Tensor, Tensor]:
    """RoPE ``cos, sin`` at this rank's *global* positions: ``cp_split`` of the full tables
    ``rope_cos/sin(seq, half, theta)`` (positions permuted by the same chunk map as tokens)."""
    return (cp_split(rope_cos(seq, half, theta), seq, axis),
            cp_split(rope_sin(seq, half, theta), seq, axis))


def rope_with_tables(x: object, head: DimLike, half: Dim, cos: object, sin: object) -> Tensor:
    """Rotate-half RoPE (as :func:`spec_lang.ops.rope`) with given ``cos, sin`` tables
    (dims ``(seq, half)``; e.g. :func:`cp_rope_tables`). x: (..., seq, head) -> x's dims."""
    t = _t(x)
    hn = dim_name(head)
    x1 = ops.rename(ops.chunk(t, hn, 2, 0), hn, half)
    x2 = ops.rename(ops.chunk(t, hn, 2, 1), hn, half)
    c, s = _t(cos), _t(sin)
    o1 = ops.sub(ops.mul(x1, c), ops.mul(x2, s))
    o2 = ops.add(ops.mul(x2, c), ops.mul(x1, s))
    return ops.concat([ops.rename(o1, half, hn, block=(0, 2)),
                       ops.rename(o2, half, hn, block=(1, 2))], hn)


def cp_causal_mask(q: DimLike, k: DimLike, axis: str = Axis.CP) -> Tensor:
    """The causal mask between this rank's query positions and *all* key positions, both in
    load-balanced order: ``cp_split(load_balance(causal_mask(q, k), k), q)``, dims
    ``(q[axis], k)``; entry ``[s, t] = [pos(t) <= pos(s)]`` for the global positions ``pos``."""
    m = load_balance(causal_mask(q, k), k, axis)
    return cp_split(m, q, axis)
