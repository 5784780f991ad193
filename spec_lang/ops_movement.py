"""Traced data movement: ``rename``, ``transpose``, ``chunk`` / ``chunks`` and ``concat`` (public
through :mod:`spec_lang.ops`). Placements are kept; a chunk or concat of a sharded dim is
checked against the local sizes of the traced mesh.
"""

from __future__ import annotations

from collections.abc import Sequence

from spec_lang.dims import DimLike, dim_name
from spec_lang.ops_constants import _t
from spec_lang.tensor import Tensor, current_trace, fail, user_site
from spec_lang.term import DimSpec, Op, term


def _local_size(d: DimSpec) -> int | None:
    tr = current_trace()
    if tr is None or d.name not in tr.sizes:
        return None
    n = tr.sizes[d.name]
    for a in d.shards:
        k = int(a.split("/")[1]) if a.startswith("#") else tr.mesh.get(a)
        if k is None:
            return None
        n //= k
    return n


def rename(x: object, old: DimLike, new: DimLike, *, block: tuple[int, int] | None = None) -> Tensor:
    """The same values with dim ``old`` called ``new`` (e.g. keys' ``S -> T`` in attention).

    Placement is kept. Two special cases make RoPE's rotate-half expressible with typed blocks:

    * ``old`` is a chunk (``HD[#i/2]``): the chunk marker is dropped and ``new`` is a fresh dim
      of the block's size (``Dim("HD_half", HD/2)``).
    * ``block=(i, n)``: the result is block ``i`` of ``n`` of ``new`` (``HD_half -> HD[#i/2]``),
      ready for :func:`concat`.
    """
    t = _t(x)
    on = dim_name(old)
    nn = dim_name(new)
    if on not in t.dims:
        raise fail(f"rename: {t.describe()} has no dim {on}")
    if nn in t.dims and nn != on:
        raise fail(f"rename {on} -> {nn}: {t.describe()} already has dim {nn}")
    src = t.term.dim(on)
    shards = src.shards
    if shards and shards[-1].startswith("#"):
        shards = shards[:-1]
    if block is not None:
        i, n = block
        if not (0 <= i < n):
            raise fail(f"rename block {block}: need 0 <= i < n")
        shards = shards + (f"#{i}/{n}",)
    dst = DimSpec(nn, shards)
    tr = current_trace()
    if tr is not None:
        ls = _local_size(src)
        if isinstance(new, str) and nn not in tr.sizes and ls is not None and not shards:
            tr.record_size(nn, ls)
        ld = _local_size(dst)
        if ls is not None and ld is not None and ls != ld:
            raise fail(f"rename {src} -> {dst}: local sizes {ls} and {ld} differ")
    dims = tuple(dst if d.name == on else d for d in t.term.dims)
    return Tensor(term(Op.RENAME, (t.term,), (on, nn), dims), user_site(2))


def transpose(x: object, *dims: DimLike) -> Tensor:
    """A no-op on meaning (dims are named): returns ``x`` after checking ``dims`` are its dims."""
    t = _t(x)
    names = [dim_name(d) for d in dims]
    if sorted(names) != sorted(t.dims):
        raise fail(f"transpose{tuple(names)} of {t.describe()}: give each dim exactly once")
    return t


def chunk(x: object, d: DimLike, parts: int, index: int) -> Tensor:
    """Block ``index`` of ``parts`` equal blocks of ``x`` along ``d``; the dim's type becomes
    ``d[#index/parts]`` (size ``|d|/parts``)."""
    t = _t(x)
    n = dim_name(d)
    if n not in t.dims:
        raise fail(f"chunk: {t.describe()} has no dim {n}")
    if not (isinstance(parts, int) and parts >= 1 and 0 <= index < parts):
        raise fail(f"chunk({n}, parts={parts}, index={index}): need 0 <= index < parts")
    src = t.term.dim(n)
    ls = _local_size(src)
    if ls is not None and ls % parts:
        raise fail(f"chunk of {t.describe()}: dim {n} (local size {ls}) does not split into "
                   f"{parts} equal blocks; change {n}'s size or the number of parts")
    dst = DimSpec(n, src.shards + (f"#{index}/{parts}",))
    dims = tuple(dst if x.name == n else x for x in t.term.dims)
    return Tensor(term(Op.CHUNK, (t.term,), (n, parts, index), dims), user_site(2))


def chunks(x: object, d: DimLike, parts: int) -> list[Tensor]:
    """All ``parts`` blocks of ``x`` along ``d`` (see :func:`chunk`)."""
    return [chunk(x, d, parts, i) for i in range(parts)]


def concat(xs: Sequence[object], d: DimLike) -> Tensor:
    """Concatenate blocks ``d[#0/n], ..., d[#n-1/n]`` along ``d`` in order (inverse of chunks)."""
    ts = [_t(x) for x in xs]
    n = dim_name(d)
    if not ts:
        raise fail("concat of no blocks")
    base: DimSpec | None = None
    for i, t in enumerate(ts):
        if n not in t.dims:
            raise fail(f"concat along {n}: block {i} {t.describe()} has no dim {n}")
        ds = t.term.dim(n)
        if not ds.shards or ds.shards[-1] != f"#{i}/{len(ts)}":
            raise fail(f"concat along {n}: block {i} is {ds}, expected {n}[...#{i}/{len(ts)}] "
                       f"(a chunk or a rename(..., block=({i}, {len(ts)})))")
        b = DimSpec(n, ds.shards[:-1])
        if base is not None and b != base:
            raise fail(f"concat along {n}: blocks are placed differently ({base} vs {b})")
        base = b
    assert base is not None
    dims: dict[str, DimSpec] = {}
    for t in ts:
        for x in t.term.dims:
            if x.name == n:
                dims.setdefault(n, base)
            elif dims.setdefault(x.name, x) != x:
                raise fail(f"concat: dim {x.name} placed differently across blocks")
    return Tensor(term(Op.CONCAT, tuple(t.term for t in ts), (n,), tuple(dims.values())),
                  user_site(2))
