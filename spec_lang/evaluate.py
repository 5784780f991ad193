"""Reference semantics: evaluate terms in float64 with numpy, vectorised over rank axes.

This is the meaning of every op (``docs/verifier-internals.md`` section 1) as code. The
refuter and every rewrite rule's soundness test evaluate both sides with it.

A value is a :class:`NamedArray`: a numpy array whose axes are named. Rank axes come first and
are named ``"@dp"``, ``"@tp"``, ... (one per mesh axis the value varies over, size ``|axis|``);
the remaining axes are the term's dims by name (local sizes for sharded dims). One evaluation
therefore computes every rank at once, and a value that does not vary over an axis is stored
once, not ``|axis|`` times.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from spec_lang.term import Binding, DimSpec, Op, Term, TermError, walk

__all__ = ["NamedArray", "EvaluationError", "common_axes", "evaluate", "sample_inputs", "value_of",
           "rank_axis"]


class EvaluationError(TermError):
    """A term cannot be evaluated (missing input, inconsistent sizes, unsupported op)."""


def rank_axis(axis: str) -> str:
    """Name of the array axis that holds the rank coordinate on mesh axis ``axis``."""
    return "@" + axis


@dataclass(frozen=True, slots=True)
class NamedArray:
    """A float64 array with named axes (rank axes ``@a`` first, then dims)."""

    axes: tuple[str, ...]
    data: np.ndarray

    def __post_init__(self) -> None:
        if self.data.ndim != len(self.axes):
            raise EvaluationError(f"array of rank {self.data.ndim} with axes {self.axes}")

    @property
    def rank_axes(self) -> tuple[str, ...]:
        return tuple(a for a in self.axes if a.startswith("@"))

    def size(self, axis: str) -> int:
        return self.data.shape[self.axes.index(axis)]

    def transpose_to(self, axes: tuple[str, ...]) -> np.ndarray:
        """Data with axes in the order ``axes`` (a superset: missing ones become size 1)."""
        perm = [self.axes.index(a) for a in axes if a in self.axes]
        d = self.data.transpose(perm)
        shape = []
        it = iter(d.shape)
        for a in axes:
            shape.append(next(it) if a in self.axes else 1)
        return d.reshape(shape)

    def at_rank(self, coords: Mapping[str, int]) -> NamedArray:
        """The value on the rank with these coordinates (``{"tp": 1}``); dims only."""
        d, axes = self.data, list(self.axes)
        for a in list(axes):
            if a.startswith("@"):
                i = axes.index(a)
                d = np.take(d, coords.get(a[1:], 0), axis=i)
                axes.pop(i)
        return NamedArray(tuple(axes), d)


def _const(v: Any) -> float:
    """An exact constant as float64: +-inf beyond float64's range (adversarial finding R2-6: a
    3000-digit rational raised OverflowError; an infinite value makes the replay overflow,
    which is inconclusive, never a proof or a refutation)."""
    try:
        if isinstance(v, Fraction):
            return v.numerator / v.denominator
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def common_axes(vals: Iterable[Any], *, skip: str | None = None
                ) -> tuple[tuple[str, ...], dict[str, int]]:
    """The common axis order of named values (rank axes sorted first, then dims in order of
    appearance) and each axis's size; ``vals`` have ``.axes`` and ``.data.shape``.

    Raises:
        EvaluationError: an axis (other than ``skip``) has two different sizes.
    """
    vals = list(vals)
    ranks = sorted({a for v in vals for a in v.axes if a.startswith("@")})
    dims: list[str] = []
    for v in vals:
        dims += [a for a in v.axes if not a.startswith("@") and a not in dims]
    sizes: dict[str, int] = {}
    for v in vals:
        for a, n in zip(v.axes, v.data.shape):
            if a != skip and sizes.setdefault(a, n) != n:
                raise EvaluationError(f"axis {a!r} has size {sizes[a]} and {n} in one operation")
    return tuple(ranks) + tuple(dims), sizes


def _align(vals: list[NamedArray]) -> tuple[tuple[str, ...], list[np.ndarray]]:
    """Broadcast named arrays to a common axis order (see :func:`common_axes`)."""
    axes, _ = common_axes(vals)
    return axes, [v.transpose_to(axes) for v in vals]


def _block_offsets(spec: DimSpec, binding: Binding) -> tuple[list[str], np.ndarray]:
    """For a dim sharded over axes (a1..ak): global index of local position v on each rank.

    Returns the rank axes ``[@a1..@ak]`` and an int array of shape ``(|a1|, ..., |ak|, local)``.
    Nested blocks: axis a1 splits the full dim, a2 splits a1's block, and so on (outermost first).
    """
    full = binding[spec.name]
    axes = [a for a in spec.shards if not a.startswith("#")]
    if len(axes) != len(spec.shards):
        raise EvaluationError(f"one-hot over a chunked dim {spec} is not supported")
    sizes = [binding[a] for a in axes]
    local = binding.local_size(spec)
    idx = np.zeros(sizes + [local], dtype=np.int64)
    block = full
    for i, n in enumerate(sizes):
        block //= n
        shape = [1] * (len(sizes) + 1)
        shape[i] = n
        idx = idx + (np.arange(n) * block).reshape(shape)
    idx = idx + np.arange(local).reshape([1] * len(sizes) + [local])
    return [rank_axis(a) for a in axes], idx


class _Evaluator:
    def __init__(self, binding: Binding, inputs: Mapping[str, np.ndarray | NamedArray],
                 rng: np.random.Generator):
        self.b = binding
        self.inputs = inputs
        self.rng = rng
        self.memo: dict[int, NamedArray] = {}

    def size(self, d: DimSpec) -> int:
        return self.b.local_size(d)

    def run(self, t: Term) -> NamedArray:  # noqa: C901, PLR0912 -- one case per op, by design
        v = [self.memo[id(c)] for c in t.args]
        op, at = t.op, t.attrs
        match op:
            case Op.INPUT:
                name = at[0]
                if name not in self.inputs:
                    raise EvaluationError(f"no value for input {name!r}")
                x = self.inputs[name]
                if isinstance(x, NamedArray):
                    return x
                x = np.asarray(x, dtype=np.float64)
                want = tuple(self.size(d) for d in t.dims)
                if x.shape != want:
                    raise EvaluationError(f"input {name!r} has shape {x.shape}, dims {t.dims} "
                                          f"need {want}")
                return NamedArray(t.dim_names, x)
            case Op.CONST:
                return NamedArray((), np.array(_const(at[0])))
            case Op.DIM_SIZE | Op.AXIS_SIZE:
                return NamedArray((), np.array(float(self.b[at[0]])))
            case Op.RANK_CONST:
                axis, values = at
                if len(values) != self.b[axis]:
                    raise EvaluationError(f"RANK_CONST over {axis!r} has {len(values)} values, "
                                          f"axis size is {self.b[axis]}")
                return NamedArray((rank_axis(axis),), np.array([_const(x) for x in values]))
            case Op.CAUSAL_MASK:
                q, k = t.dims
                nq, nk = self.size(q), self.size(k)
                return NamedArray((q.name, k.name),
                                  (np.arange(nk)[None, :] <= np.arange(nq)[:, None]).astype(float))
            case Op.ROPE_COS | Op.ROPE_SIN:
                s, h = t.dims
                theta = _const(at[2])
                half = self.size(h)
                pos = np.arange(self.size(s), dtype=np.float64)
                freq = theta ** (-np.arange(half, dtype=np.float64) / half)
                ang = pos[:, None] * freq[None, :]
                return NamedArray((s.name, h.name), np.cos(ang) if op is Op.ROPE_COS else np.sin(ang))
            case Op.ADD | Op.MUL | Op.MAXIMUM | Op.WHERE:
                axes, ds = _align(v)
                if op is Op.ADD:
                    out = ds[0]
                    for d in ds[1:]:
                        out = out + d
                elif op is Op.MUL:
                    out = ds[0]
                    for d in ds[1:]:
                        out = out * d
                elif op is Op.MAXIMUM:
                    out = np.maximum(ds[0], ds[1])
                else:
                    out = np.where(ds[0] != 0, ds[1], ds[2])
                return self._finish(axes, np.broadcast_to(out, self._shape(axes, ds)).copy(), t)
            case (Op.NEG | Op.RECIP | Op.EXP | Op.LOG | Op.SQRT | Op.RSQRT | Op.POW | Op.SIGMOID
                  | Op.SILU | Op.TANH | Op.GELU | Op.ERF):
                x = v[0].data
                # 1/0, 0^-1, log(0), sqrt(-1): the IEEE value is the semantics (a NaN where the
                # spec is finite is a divergence); overflow follows the caller's errstate (the
                # replay raises on it: proofs/replay.py)
                with np.errstate(divide="ignore", invalid="ignore"):
                    y = _UNARY[op](x, at)
                return NamedArray(v[0].axes, y)
            case Op.CAST | Op.STOP_GRAD:
                return v[0]
            case Op.EINSUM:
                return self._einsum(v, t)
            case Op.REDUCE_MAX:
                x = v[0]
                idx = tuple(x.axes.index(d) for d in at[0])
                keep = tuple(a for a in x.axes if a not in at[0])
                return NamedArray(keep, np.max(x.data, axis=idx))
            case Op.ONE_HOT:
                (d,) = [s for s in t.dims if s.name == at[0]]
                raxes, gidx = _block_offsets(d, self.b)
                idx = v[0]
                # indices (..., ) == global index (ranks..., local)
                g = NamedArray(tuple(raxes) + (d.name,), gidx.astype(np.float64))
                axes, (a, bb) = _align([idx, g])
                return self._finish(axes, (a == bb).astype(np.float64), t)
            case Op.TOPK_MASK:
                return _topk_mask(v[0], at[0], at[1], v[1] if len(v) > 1 else None)
            case Op.RENAME:
                old, new = at
                return NamedArray(tuple(new if a == old else a for a in v[0].axes), v[0].data)
            case Op.CHUNK:
                dim, parts, i = at
                x = v[0]
                ax = x.axes.index(dim)
                n = x.data.shape[ax]
                if n % parts:
                    raise EvaluationError(f"CHUNK of {dim} (size {n}) into {parts} parts")
                sl = [slice(None)] * x.data.ndim
                sl[ax] = slice(i * n // parts, (i + 1) * n // parts)
                return NamedArray(x.axes, x.data[tuple(sl)])
            case Op.CONCAT:
                axes, ds = _align(v)
                ax = axes.index(at[0])
                full = [np.broadcast_to(d, tuple(max(s) if j != ax else d.shape[ax]
                                                 for j, s in enumerate(zip(*[q.shape for q in ds]))))
                        for d in ds]
                return NamedArray(axes, np.concatenate(full, axis=ax))
            case Op.PERMUTE:
                dim, order = at
                x = v[0]
                ax = x.axes.index(dim)
                n, parts = x.data.shape[ax], len(order)
                if n % parts:
                    raise EvaluationError(f"PERMUTE of {dim} (size {n}) into {parts} blocks")
                blocks = np.split(x.data, parts, axis=ax)
                return NamedArray(x.axes, np.concatenate([blocks[j] for j in order], axis=ax))
            case Op.SHIFT:
                x = v[0]
                ax = x.axes.index(at[0])
                y = np.zeros_like(x.data)
                src = [slice(None)] * x.data.ndim
                dst = [slice(None)] * x.data.ndim
                src[ax], dst[ax] = slice(1, None), slice(0, -1)
                y[tuple(dst)] = x.data[tuple(src)]
                return NamedArray(x.axes, y)
            case Op.SHARD:
                dim, axis = at
                return self._shard(v[0], dim, axis)
            case Op.PART:
                return self._part(v[0], at[0], t)
            case Op.ALL_REDUCE:
                return self._all_reduce(v[0], at[0], at[1])
            case Op.ALL_GATHER:
                return self._all_gather(v[0], at[0], at[1])
            case Op.REDUCE_SCATTER:
                return self._shard(self._all_reduce(v[0], at[0], "sum"), at[1], at[0])
            case Op.ALL_TO_ALL:
                return self._all_to_all(v[0], at[0], at[1], at[2])
            case Op.BROADCAST:
                axis, src = at
                x = v[0]
                ra = rank_axis(axis)
                if ra not in x.axes:
                    return x
                i = x.axes.index(ra)
                return NamedArray(x.axes[:i] + x.axes[i + 1:], np.take(x.data, src, axis=i))
            case Op.REGION:
                _name, fwd, _bwd, axis, dim = at
                x = v[0]
                match fwd:
                    case "identity":
                        return x
                    case "all_reduce":
                        return self._all_reduce(x, axis, "sum")
                    case "all_gather":
                        return self._all_gather(x, axis, dim)
                    case "split":
                        return self._shard(x, dim, axis)
                    case "reduce_scatter":
                        return self._shard(self._all_reduce(x, axis, "sum"), dim, axis)
                    case "all_to_all":
                        return self._all_to_all(x, axis, dim[0], dim[1])
                    case "all_to_all_reverse":
                        return self._all_to_all(x, axis, dim[1], dim[0])
                    case _:
                        raise EvaluationError(f"REGION with unknown forward {fwd!r}")
            case _:
                raise EvaluationError(f"no reference semantics for {op.name}")

    # -- helpers -------------------------------------------------------------------------------
    @staticmethod
    def _shape(axes: tuple[str, ...], ds: list[np.ndarray]) -> tuple[int, ...]:
        return tuple(max(d.shape[i] for d in ds) for i in range(len(axes)))

    @staticmethod
    def _finish(axes: tuple[str, ...], data: np.ndarray, t: Term) -> NamedArray:
        # dims of size 1 that came from broadcasting stay as they are; shapes are checked by type
        return NamedArray(axes, data)

    def _einsum(self, v: list[NamedArray], t: Term) -> NamedArray:
        out_dims = tuple(t.attrs[0])
        ranks = sorted({a for x in v for a in x.rank_axes})
        names: dict[str, str] = {}
        letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        sizes: dict[str, int] = {}
        subs = []
        for x in v:
            s = ""
            for a, n in zip(x.axes, x.data.shape):
                if a not in names:
                    names[a] = next(letters)
                if sizes.setdefault(a, n) != n:
                    raise EvaluationError(f"einsum: axis {a!r} has sizes {sizes[a]} and {n}")
                s += names[a]
            subs.append(s)
        out_axes = tuple(ranks) + out_dims
        for a in out_dims:
            if a not in names:
                raise EvaluationError(f"einsum output dim {a!r} is in no operand")
        out = "".join(names[a] for a in out_axes)
        data = np.einsum(",".join(subs) + "->" + out, *[x.data for x in v], optimize=len(v) > 2)
        return NamedArray(out_axes, np.asarray(data, dtype=np.float64))

    def _shard(self, x: NamedArray, dim: str, axis: str) -> NamedArray:
        ra = rank_axis(axis)
        n = self.b[axis]
        i = x.axes.index(dim)
        size = x.data.shape[i]
        if size % n:
            raise EvaluationError(f"SHARD of {dim} (local size {size}) over {axis} (size {n})")
        shape = x.data.shape[:i] + (n, size // n) + x.data.shape[i + 1:]
        d = np.moveaxis(x.data.reshape(shape), i, 0)  # (n blocks, ..., local, ...)
        if ra not in x.axes:
            return NamedArray((ra,) + x.axes, d)
        # x varies over the axis: rank r keeps block r of its own value (Megatron's split)
        j = x.axes.index(ra) + 1  # the rank axis, shifted by the new leading block axis
        d = np.diagonal(d, axis1=0, axis2=j)  # diagonal moves to the end
        d = np.moveaxis(d, -1, 0)
        return NamedArray((ra,) + tuple(a for a in x.axes if a != ra), np.ascontiguousarray(d))

    def _part(self, x: NamedArray, axis: str, t: Term) -> NamedArray:
        ra = rank_axis(axis)
        if ra in x.axes:
            raise EvaluationError(f"PART over {axis!r} of a value that already varies over it")
        key = id(t)
        n = self.b[axis]
        noise = self.rng.standard_normal((n - 1,) + x.data.shape)
        last = x.data - noise.sum(axis=0)
        return NamedArray((ra,) + x.axes, np.concatenate([noise, last[None]], axis=0))

    def _all_reduce(self, x: NamedArray, axis: str, reduce: str) -> NamedArray:
        ra = rank_axis(axis)
        if ra not in x.axes:
            if reduce == "sum":
                return NamedArray(x.axes, x.data * self.b[axis])
            if reduce == "max":
                return x
            raise EvaluationError(f"ALL_REDUCE with unknown reduce {reduce!r}")
        i = x.axes.index(ra)
        axes = x.axes[:i] + x.axes[i + 1:]
        if reduce == "sum":
            return NamedArray(axes, x.data.sum(axis=i))
        if reduce == "max":
            return NamedArray(axes, x.data.max(axis=i))
        raise EvaluationError(f"ALL_REDUCE with unknown reduce {reduce!r}")

    def _all_to_all(self, x: NamedArray, axis: str, split: str, concat: str) -> NamedArray:
        """Reference over per-rank blocks (``torch.distributed.all_to_all``): rank ``q`` cuts its
        value into ``|axis|`` blocks along ``split`` and sends block ``r`` to rank ``r``; rank
        ``r`` concatenates what it receives along ``concat`` in rank order."""
        ra = rank_axis(axis)
        n = self.b[axis]
        if ra in x.axes:
            d = np.moveaxis(x.data, x.axes.index(ra), 0)
        else:
            d = np.broadcast_to(x.data, (n,) + x.data.shape)
        axes = tuple(a for a in x.axes if a != ra)
        si, ci = axes.index(split), axes.index(concat)
        if d.shape[1 + si] % n:
            raise EvaluationError(f"ALL_TO_ALL splits {split} (local size {d.shape[1 + si]}) "
                                  f"over {axis} (size {n})")
        sent = [np.split(d[q], n, axis=si) for q in range(n)]
        out = np.stack([np.concatenate([sent[q][r] for q in range(n)], axis=ci)
                        for r in range(n)])
        return NamedArray((ra,) + axes, out)

    def _all_gather(self, x: NamedArray, axis: str, dim: str) -> NamedArray:
        ra = rank_axis(axis)
        n = self.b[axis]
        if ra not in x.axes:  # every rank holds the same block: the gather repeats it n times
            i = x.axes.index(dim)
            return NamedArray(x.axes, np.concatenate([x.data] * n, axis=i))
        d = np.moveaxis(x.data, x.axes.index(ra), 0)
        axes = tuple(a for a in x.axes if a != ra)
        i = axes.index(dim)
        d = np.moveaxis(d, 0, i)  # (..., n, local, ...)
        shape = d.shape[:i] + (d.shape[i] * d.shape[i + 1],) + d.shape[i + 2:]
        return NamedArray(axes, d.reshape(shape))


def _topk_mask(x: NamedArray, dim: str, k: int, eligible: NamedArray | None = None
               ) -> NamedArray:
    """1 where ``x`` is among the ``k`` largest along ``dim``, else 0; ties go to the lower
    index (a stable sort of ``-x``), as ``torch.topk`` on distinct values. With ``eligible``:
    the ``k`` largest among the entries whose eligibility is 1 (a stable sort on
    ``(not eligible, -x)``), ineligible entries 0."""
    if eligible is not None:
        axes, (a, e) = _align([x, eligible])
        shape = np.broadcast_shapes(a.shape, e.shape)
        a, e = np.broadcast_to(a, shape), np.broadcast_to(e, shape)
        i = axes.index(dim)
        ok = e == 1
        a_m, ok_m = np.moveaxis(a, i, -1), np.moveaxis(ok, i, -1)
        order = np.lexsort((-a_m, ~ok_m), axis=-1)        # eligible first, then by -x; stable
        pos = np.argsort(order, axis=-1, kind="stable")
        sel = np.moveaxis((pos < k) & ok_m, -1, i)
        return NamedArray(axes, sel.astype(np.float64))
    i = x.axes.index(dim)
    order = np.argsort(-x.data, axis=i, kind="stable")
    pos = np.argsort(order, axis=i, kind="stable")  # position of each entry in the sorted order
    return NamedArray(x.axes, (pos < k).astype(np.float64))


_erf = np.vectorize(math.erf, otypes=[np.float64])  # numpy has no erf; exact to ~1 ulp


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


_UNARY = {
    Op.NEG: lambda x, a: -x,
    Op.RECIP: lambda x, a: 1.0 / x,
    Op.EXP: lambda x, a: np.exp(x),
    Op.LOG: lambda x, a: np.log(x),
    Op.SQRT: lambda x, a: np.sqrt(x),
    Op.RSQRT: lambda x, a: 1.0 / np.sqrt(x),
    Op.POW: lambda x, a: np.power(x, _const(a[0])),
    Op.SIGMOID: lambda x, a: 1.0 / (1.0 + np.exp(-x)),
    Op.SILU: lambda x, a: x / (1.0 + np.exp(-x)),
    Op.TANH: lambda x, a: np.tanh(x),
    Op.GELU: lambda x, a: _gelu(x),
    Op.ERF: lambda x, a: _erf(x),
}


def evaluate(roots: Iterable[Term] | Term, binding: Binding,
             inputs: Mapping[str, np.ndarray | NamedArray], *,
             rng: np.random.Generator | None = None,
             keep: str = "all") -> dict[Term, NamedArray]:
    """Evaluate ``roots`` (and every node below them) in float64.

    Args:
        roots: terms to evaluate; shared subterms are evaluated once.
        binding: sizes of dims and mesh axes (dims at the sizes the inputs were drawn with).
        inputs: value of every ``INPUT`` by name, with the INPUT's dims in order (full sizes).
        rng: draws the addends of ``PART`` terms (default: seeded with 0).
        keep: ``"all"`` returns every node's value; ``"roots"`` returns the roots' values only
            and frees each intermediate value as soon as its last consumer has run (peak memory
            is then the live frontier of the DAG, not all of it). The values are the same.

    Returns:
        ``{term: NamedArray}`` for every node reached (``keep="all"``) or for the roots.

    Raises:
        EvaluationError: a missing input, inconsistent sizes or an op without semantics.
    """
    if isinstance(roots, Term):
        roots = [roots]
    roots = list(roots)
    if keep not in ("all", "roots"):
        raise EvaluationError(f"keep must be 'all' or 'roots', got {keep!r}")
    ev = _Evaluator(binding, inputs, rng or np.random.default_rng(0))
    order = walk(roots)
    uses: dict[int, int] = {}
    if keep == "roots":
        for t in order:
            for c in t.args:
                uses[id(c)] = uses.get(id(c), 0) + 1
        pinned = {id(r) for r in roots}
    out: dict[Term, NamedArray] = {}
    for t in order:
        val = ev.run(t)
        ev.memo[id(t)] = val
        if keep == "all":
            out[t] = val
            continue
        if id(t) in pinned:
            out[t] = val
        for c in t.args:  # free a child once its last consumer has run
            uses[id(c)] -= 1
            if uses[id(c)] == 0 and id(c) not in pinned:
                ev.memo.pop(id(c), None)
    return out


def value_of(t: Term, binding: Binding, inputs: Mapping[str, np.ndarray | NamedArray],
             **kw: Any) -> NamedArray:
    """Evaluate one term (see :func:`evaluate`)."""
    return evaluate([t], binding, inputs, **kw)[t]


def sample_inputs(roots: Iterable[Term] | Term, binding: Binding,
                  rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Random float64 values for every ``INPUT`` below ``roots``, drawn by its domain.

    ``real``: standard normal. ``positive``: uniform in [0.5, 2). ``mask``: 0/1 with a random
    keep-probability per call (so token counts are uneven across shards and micro-batches) and
    at least one 1. ``index``: uniform integers in ``[0, size(attrs[3]))``.
    """
    if isinstance(roots, Term):
        roots = [roots]
    out: dict[str, np.ndarray] = {}
    for t in walk(list(roots)):
        if t.op is not Op.INPUT or t.attrs[0] in out:
            continue
        name, _kind, domain = t.attrs[:3]
        shape = tuple(binding.local_size(d) for d in t.dims)
        if domain == "real":
            x = rng.standard_normal(shape)
        elif domain == "positive":
            x = rng.uniform(0.5, 2.0, shape)
        elif domain == "mask":
            x = (rng.uniform(size=shape) < rng.uniform(0.3, 0.9)).astype(np.float64)
            x.reshape(-1)[0] = 1.0
        elif domain == "index":
            x = rng.integers(0, binding[t.attrs[3]], size=shape).astype(np.float64)
        else:
            raise EvaluationError(f"input {name!r} has unknown domain {domain!r}")
        out[name] = x
    return out
