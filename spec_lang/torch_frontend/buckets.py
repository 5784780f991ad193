"""Flat gradient buckets: ``torch.cat`` of flattened tensors, reduced once, sliced back (issue 11).

DDP, Megatron's contiguous grad buffer and DeepSpeed flatten gradients into one 1-d buffer,
all-reduce it once and copy the slices back::

    flat = torch.cat([p.grad.view(-1) for p in ps]); dist.all_reduce(flat); flat.div_(n)
    p.grad.copy_(flat[a:b].view_as(p))

The buffer's one dim is no named dim (nor a product of them): it is a sum of products. It is
lowered as a :class:`~spec_lang.torch_frontend.values.Bucket`, the list of its pieces (each a
1-d flattening of a named-dims value, with its layout), never as an IR dim:

* ``cat`` along dim 0 of 1-d tensors that cannot be blocks of one named dim is a bucket
  (``rules_layout.Cat``: the ``"bucket"`` mark and a fresh atom for its dim in pass 1);
* an op that acts on each entry independently of its position gives the bucket of its values
  on each piece (:data:`PIECEWISE`): ``x*s``, ``x/s``, ``x+s``, ``x-s`` by a scalar (a python
  literal read through ``Traces.scalar``, or a 0-d tensor), ``x+y``, ``x-y``, ``x*y``,
  ``x/y`` of two buckets of the same pieces (the same named dims, so the same boundaries at
  every size), ``neg``, the all-reduces (``dist.all_reduce`` and the functional one with its
  ``wait_tensor``: elementwise across ranks, so they commute with ``cat`` and with a slice),
  ``clone``, ``detach``, a float cast and the in-place forms; ``copy_`` of a bucket into a 1-d
  tensor of its size; a view of it to its own 1-d shape;
* ``slice(bucket, 0, a, b)`` with ``[a, b)`` exactly piece ``k``'s entries is piece ``k``
  (:func:`slice_dims`, :func:`lower_on_bucket`). The bounds are checked at the probe sizes
  (the lowered trace) *and* at the real sizes: the slice's twin in the real-size trace must take
  piece ``k``'s entries there, the pieces' real numels given by their named dims' real sizes
  (a bound right at the probe sizes only, e.g. computed from a probe number, was a false
  accept of the slice rules before: R33-2, R34-1);
* ``split_with_sizes(bucket, sizes)`` is the list of pieces when ``sizes`` are the pieces'
  numels at the probe sizes, the same on every rank, and their numels at the real sizes in the
  real twin (:func:`split_dims`, ``_split``; R35b-2);
* ``cat(xs, out=buf)`` is ``cat(xs)`` written into all of ``buf`` (``rules_layout.CatOut``,
  ``lower.OUT_WRITES``; R35b-3);
* a piece taken *before* a write of a bucket into the whole storage (Megatron's contiguous
  buffer: ``p.grad = flat[a:b].view_as(p)``, then ``flat.div_(n)``) reads piece ``k`` of the
  written bucket, its bounds checked again against it (:func:`piece_read`, R35b-1); a write
  through one piece gives the storage the bucket with that piece replaced (:func:`piece_write`,
  R36b-3);
* ``flat.zero_()`` / ``flat.fill_(v)`` (Megatron's ``zero_grad_buffer``) is the bucket of that
  constant on every piece (:func:`filled`, R37b-4): written back whole, so the piece views read
  it as above.

Anything else that reads a bucket (a reduction or a norm over it, a view to 2-d, a slice across
a boundary or picked by the rank, ZeRO's ``flat.chunk(dp)[rank]``, an elementwise op with a
1-d tensor that is no bucket of the same pieces) is :class:`~spec_lang.torch_frontend.lower.
Opaque`: UNKNOWN naming the op and the user's line, never a guess.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any

import torch.fx as fx

from spec_lang.torch_frontend.analysis import Analysis, shape_of
from spec_lang.torch_frontend.dims import DimsError
from spec_lang.torch_frontend.values import TV, Bucket, Pieces

__all__ = ["PIECEWISE", "FILLS", "filled", "cat_dims", "zero_dims", "zero_bucket", "slice_dims",
           "split_dims", "cat_term", "has_bucket", "lower_on_bucket", "along", "piece_read",
           "piece_write", "written_value"]

PIECEWISE = frozenset({
    "aten.add.Tensor", "aten.add.Scalar", "aten.add_.Tensor", "aten.add_.Scalar",
    "aten.sub.Tensor", "aten.sub.Scalar", "aten.sub_.Tensor",
    "aten.mul.Tensor", "aten.mul.Scalar", "aten.mul_.Tensor", "aten.mul_.Scalar",
    "aten.div.Tensor", "aten.div.Scalar", "aten.div_.Tensor", "aten.div_.Scalar",
    "aten.neg.default", "aten.clone.default", "aten.detach.default", "aten.alias.default",
    "aten._to_copy.default", "_c10d_functional.all_reduce.default",
    "_c10d_functional.wait_tensor.default", "c10d.allreduce_.default",
})
"""Ops applied entry by entry, the same way at every position: on a bucket, piece by piece."""
FILLS = frozenset({"aten.zero_.default", "aten.fill_.Scalar"})
"""``flat.zero_()`` (Megatron's ``zero_grad_buffer``) and ``flat.fill_(v)`` of a bucket: every
entry becomes one constant (``fill_``'s scalar, the same on every rank, held exactly by the
dtype: ``rules_elementwise._fill_value``), so the bucket of that constant on each piece, the
pieces' layouts and numels kept (R37b-4)."""

_VIEWS = frozenset({"aten.view.default", "aten._unsafe_view.default",
                    "aten._reshape_alias.default", "aten.lift_fresh.default"})
_WHY = ("reads a flat bucket (a torch.cat of flattened tensors) in a way that is not lowered: "
        "only an all-reduce, an elementwise op by a scalar or with a bucket of the same pieces, "
        "copy_, zero_ / fill_ by a scalar, and a slice that is exactly one piece (at the probe "
        "and at the real sizes) are")


# -- pass 1 -----------------------------------------------------------------------------------
def cat_dims(n: fx.Node, a: Analysis, lays: list, d: int) -> list | None:
    """The layout of ``cat(xs, 0)`` of 1-d tensors as a bucket (one fresh atom of its size),
    marking ``n`` (None: not a bucket: the cat is another dim than 0 or of a tensor that is not
    1-d)."""
    xs = n.args[0]
    if d != 0 or len(shape_of(n)) != 1 or any(len(shape_of(x)) != 1 for x in xs):
        return None
    q = a.dims.fresh(shape_of(n)[0], a.where(n))
    pieces = [[list(dim) for dim in lay] for lay in lays]
    a.marks[n] = ("bucket", q, pieces, tuple(shape_of(x)[0] for x in xs))
    a.marks[("buckets",)] = [*a.marks.get(("buckets",), ()), n]   # recorded (dims.Marks)
    return [[q]]


def zero_dims(n: fx.Node, a: Analysis) -> list | None:
    """Pass 1 of a 1-d ``torch.zeros(size)`` cut into pieces by its slices (Megatron's
    ``main_grad`` buffer: ``buf = zeros(n)``; ``p.main_grad = buf[a:b].view_as(p)``, R36b-3;
    views taken before a bucket is copied into it, R36b-4): a bucket of zeros (marking ``n``
    as :func:`cat_dims` does, each piece a fresh dim of its numel, named by what the views of
    it meet) when the slices of ``n`` along dim 0 (int bounds, step 1) are at least two
    distinct ranges that cut ``[0, size)`` into consecutive pieces; None otherwise (the
    factory's own fresh dim). The pieces' bounds at the real sizes are checked as each slice
    is lowered (:func:`_slice`)."""
    shape = shape_of(n)
    if len(shape) != 1 or shape[0] < 2:
        return None
    spans = set()
    for u in n.users:
        if str(u.target) != "aten.slice.Tensor" or u.args[0] is not n or u.kwargs \
                or (u.args[1] if len(u.args) > 1 else 0) not in (0, -1):
            continue
        b = _bounds(u, shape[0])
        if b is None or b[0] >= b[1]:
            return None
        spans.add(b)
    ordered, at = sorted(spans), 0
    for lo, hi in ordered:
        if lo != at:
            return None            # a gap or an overlap: no pieces
        at = hi
    if len(ordered) < 2 or at != shape[0]:
        return None
    numels = tuple(hi - lo for lo, hi in ordered)
    q = a.dims.fresh(shape[0], a.where(n))
    pieces = [[[a.dims.fresh(m, a.where(n))] if m != 1 else []] for m in numels]
    a.marks[n] = ("bucket", q, pieces, numels)
    a.marks[("buckets",)] = [*a.marks.get(("buckets",), ()), n]   # recorded (dims.Marks)
    return [[q]]


def zero_bucket(ctx: Any, n: fx.Node, zero: Any) -> Bucket:
    """Pass 2 of :func:`zero_dims`: the bucket whose pieces are ``zero`` (a term) in the
    layouts of the slices that cut it (each piece is some slice's)."""
    _, _, _, numels = ctx.analysis.marks[n]
    lays: dict[int, Any] = {}
    for u in n.users:
        mark = ctx.analysis.marks.get(u, ("",))
        if mark[0] == "bucketslice":
            lays.setdefault(mark[1], ctx.layout(u))
    if sorted(lays) != list(range(len(numels))):
        raise ctx.fail(n, "internal: a piece of a zeroed flat buffer with no slice")
    return Bucket(tuple(TV(zero, lays[k]) for k in range(len(numels))), numels)


def _bounds(n: fx.Node, size: int) -> tuple[int, int] | None:
    start = n.args[2] if len(n.args) > 2 and n.args[2] is not None else 0
    end = n.args[3] if len(n.args) > 3 and n.args[3] is not None else size
    step = n.args[4] if len(n.args) > 4 else 1
    if not all(isinstance(v, int) for v in (start, end, step)) or step != 1:
        return None
    start = max(0, start + size if start < 0 else start)
    end = min(size, end + size if end < 0 else end)
    return start, end


def _piece_index(numels: tuple[int, ...], lo: int, hi: int) -> int | None:
    acc = 0
    for k, m in enumerate(numels):
        if (lo, hi) == (acc, acc + m):
            return k
        acc += m
    return None


def _bucket_mark(a: Analysis, x: Any) -> tuple | None:
    """The ``"bucket"`` mark of the cat whose dim 1-d ``x``'s one atom is (None: no bucket)."""
    src = a.layouts.get(x) if isinstance(x, fx.Node) else None
    if src is None or len(src) != 1:
        return None
    atoms = a.dims.canon(src[0])
    if len(atoms) != 1:
        return None
    root = a.dims.find(atoms[0])
    cat = next((c for c in a.marks.get(("buckets",), ())
                if a.dims.find(a.marks[c][1]) is root), None)
    return None if cat is None else a.marks[cat]


def slice_dims(n: fx.Node, a: Analysis) -> list | None:
    """Pass 1 of ``slice`` of a bucket: piece ``k``'s layout when ``[start, end)`` is its
    entries at the probe sizes (marking ``n``); None when the source is no bucket.

    Raises:
        DimsError: a slice of a bucket that is no piece of it.
    """
    mark = _bucket_mark(a, n.args[0])
    if mark is None:
        return None
    _, _, pieces, numels = mark
    dim = n.args[1] if len(n.args) > 1 else 0
    b = _bounds(n, shape_of(n.args[0])[0]) if dim in (0, -1) else None
    k = None if b is None else _piece_index(numels, *b)
    if k is None:
        raise DimsError(f"{a.where(n)}: a slice of a flat bucket that is not one of its pieces "
                        f"(pieces of {list(numels)} entries)")
    a.marks[n] = ("bucketslice", k)
    # real_moves.check_real_moves leaves its real twin to :func:`_slice` (a piece's bounds are
    # no equal blocks, and they move with the sizes)
    n.meta["bucket_piece"] = k
    return [list(dim) for dim in pieces[k]]


def split_dims(n: fx.Node, a: Analysis) -> list | None:
    """Pass 1 of ``split_with_sizes(bucket, sizes)``: the pieces' layouts when ``sizes`` are the
    pieces' numels at the probe sizes (marking ``n``); None when the source is no bucket
    (R35b-2). ``split(bucket, m)`` (``aten.split.Tensor``) likewise when every piece has ``m``
    entries; None when not (R36b-5).

    Raises:
        DimsError: sizes that are not the pieces' numels, or another dim than 0.
    """
    mark = _bucket_mark(a, n.args[0])
    if mark is None:
        return None
    _, _, pieces, numels = mark
    d = n.args[2] if len(n.args) > 2 else n.kwargs.get("dim", 0)
    if str(n.target) == "aten.split.Tensor":       # flat.split(m): equal chunks (R36b-5)
        if d not in (0, -1) or not isinstance(n.args[1], int) or set(numels) != {n.args[1]}:
            return None                  # no pieces: the split's own rule (blocks of a dim)
        a.marks[n] = ("bucketsplit", len(numels))
        n.meta["bucket_piece"] = -1      # its real twin is checked by :func:`_split`
        return [[list(dim) for dim in lay] for lay in pieces]
    if d not in (0, -1) or list(n.args[1]) != list(numels):
        raise DimsError(f"{a.where(n)}: a split of a flat bucket into sizes {list(n.args[1])} "
                        f"that are not its pieces (of {list(numels)} entries)")
    a.marks[n] = ("bucketsplit", len(numels))
    return [[list(dim) for dim in lay] for lay in pieces]


# -- pass 2 -----------------------------------------------------------------------------------
def cat_term(n: fx.Node, ctx: Any, xs: list) -> Bucket:
    """The bucket of ``cat(xs)`` (its pieces' values as they are)."""
    if not all(isinstance(x, TV) and len(x.dims) == 1 for x in xs):
        raise ctx.fail(n, "a flat bucket of values that are not 1-d tensors of named dims")
    return Bucket(tuple(xs), tuple(shape_of(x)[0] for x in n.args[0]))


def _real_numel(ctx: Any, piece: TV) -> int | None:
    from spec_lang.torch_frontend.naming import _local_size  # noqa: PLC0415
    tr = ctx.traces
    out = 1
    for ds in piece.dims[0]:
        v = _local_size(ds, tr.real_sizes, tr.axis_sizes)
        if v is None or v < 0:
            return None
        out *= v
    return out


def _slice(ctx: Any, n: fx.Node, x: Bucket) -> Any:
    mark = ctx.analysis.marks.get(n)
    b = _bounds(n, shape_of(n.args[0])[0])
    k = None if b is None else _piece_index(x.numels, *b)
    if mark is None or mark[0] != "bucketslice" or k != mark[1]:
        raise ctx.fail(n, "a slice of a flat bucket that is not one of its pieces")
    piece = x.pieces[k]
    if tuple(piece.dims) != tuple(ctx.layout(n)):
        raise ctx.fail(n, "internal: a piece of a flat bucket whose dims are not the slice's")
    tr = ctx.traces
    if tr is not None and tr.real is not None:
        # the bounds are size literals: at the real sizes the twin must take piece k too
        y = tr.twin(n)
        if y is None or tr.twin(n.args[0]) is not y.args[0]:
            raise ctx.fail(n, "a slice of a flat bucket with no counterpart at the real sizes")
        real = [_real_numel(ctx, p) for p in x.pieces]
        rb = None if None in real or sum(real) != shape_of(y.args[0])[0] else \
            _bounds(y, shape_of(y.args[0])[0])
        if rb is None or _piece_index(tuple(real), *rb) != k:
            raise ctx.fail(n, f"a slice of a flat bucket that is piece {k} at the probe sizes "
                              f"but takes entries {list(rb) if rb else '?'} of pieces of "
                              f"{real} entries at the real sizes")
    return piece


def _split(ctx: Any, n: fx.Node, x: Bucket) -> Pieces:
    """``split_with_sizes(x, sizes)``: the pieces of ``x``, when ``sizes`` are their numels at
    the probe sizes, the same list on every traced rank, and the real twin's sizes are their
    numels at the real sizes (the bounds of :func:`_slice`, R35b-2)."""
    mark = ctx.analysis.marks.get(n)
    dim = n.args[2] if len(n.args) > 2 else n.kwargs.get("dim", 0)
    equal = str(n.target) == "aten.split.Tensor"     # split(m): every piece of m (R36b-5)
    sizes = [n.args[1]] * len(x.numels) if equal and isinstance(n.args[1], int) else n.args[1]
    if mark != ("bucketsplit", len(x.numels)) or list(sizes) != list(x.numels) \
            or dim not in (0, -1) or len(n.meta.get("val") or ()) != len(x.numels):
        raise ctx.fail(n, "a split of a flat bucket that is not into its pieces")
    tr = ctx.traces
    if tr is not None:
        try:           # the sizes are read here: the same on every rank, checked at real sizes
            tr.read_same_on_ranks(n, 1)
        except ValueError as e:
            raise ctx.fail(n, str(e)) from None
    if tr is not None and tr.real is not None:
        y = tr.twin(n)
        real = [_real_numel(ctx, p) for p in x.pieces]
        ysizes = [y.args[1]] * len(real) if y is not None and equal else \
            None if y is None else y.args[1]
        if y is None or tr.twin(n.args[0]) is not y.args[0] or None in real \
                or sum(real) != shape_of(y.args[0])[0] or list(ysizes) != real \
                or len(y.meta.get("val") or ()) != len(real):
            raise ctx.fail(n, f"a split of a flat bucket into its pieces at the probe sizes but "
                              f"into {y.args[1] if y is not None else '?'} at the real "
                              f"sizes, where its pieces have {real} entries")
    for i, p in enumerate(x.pieces):
        if tuple(p.dims) != tuple(ctx.layout(n, i)):
            raise ctx.fail(n, "internal: a piece of a flat bucket whose dims are not the split's")
    return Pieces(tuple(x.pieces))


def along(roots: Mapping[fx.Node, Any], views: Any) -> Any:
    """Whether node ``x`` is its first argument relabelled: an op named in ``views``, or an
    in-place op (its result is the tensor it wrote: ``p.grad.add_(g)``'s result is ``p.grad``,
    R36b-3), of the same storage and extent (``roots``, as ``lower._storage_roots``)."""
    from spec_lang.torch_frontend.registry import RULES  # noqa: PLC0415

    def follows(x: fx.Node) -> bool:
        name = str(x.target)
        return name in views or (getattr(RULES.get(name), "inplace", False)
                                 and x in roots and roots.get(x) == roots.get(x.args[0]))
    return follows


def piece_read(ctx: Any, r: fx.Node, v: Bucket, whole: Any, views: Any, why: Any) -> Any:
    """What ``r`` reads after bucket ``v`` was written into the whole storage ``r`` is part of
    (R35b-1: ``p.grad = flat[a:b].view_as(p)``, then ``flat.div_(n)``): piece ``k`` of ``v``
    when ``r`` is, through nodes ``views(x)`` says are the storage relabelled (relabelling views
    and in-place ops, :func:`along`), a slice marked as piece ``k``
    or item ``k`` of a split into the pieces, of a node ``whole(x)`` says sees all of the
    storage (its bounds checked against ``v`` as :func:`_slice` / :func:`_split` do); ``why``
    (an Opaque) for anything else or when a check fails."""
    chain = [r]
    while chain[-1].args and isinstance(chain[-1].args[0], fx.Node) and views(chain[-1]):
        chain.append(chain[-1].args[0])
    s, marks = chain[-1], ctx.analysis.marks
    from spec_lang.torch_frontend.registry import Unsupported  # noqa: PLC0415
    try:
        if r is s and marks.get(s, ("",))[0] == "bucketsplit" and whole(s.args[0]) \
                and shape_of(s.args[0]) == (v.total,):     # the split itself: the new pieces
            return _split(ctx, s, v)
        if str(s.target) == "aten.slice.Tensor" and marks.get(s, ("",))[0] == "bucketslice" \
                and whole(s.args[0]) and shape_of(s.args[0]) == (v.total,):
            piece = _slice(ctx, s, v)
        elif s.target is operator.getitem and isinstance(s.args[0], fx.Node) \
                and marks.get(s.args[0], ("",))[0] == "bucketsplit" \
                and whole(s.args[0].args[0]) and shape_of(s.args[0].args[0]) == (v.total,):
            piece = _split(ctx, s.args[0], v).values[s.args[1]]
        else:
            return why
    except Unsupported:
        return why
    return piece if r is s else TV(piece.term, ctx.layout(r))


def _on_piece(v: Any, i: int) -> Any:
    if isinstance(v, Bucket):
        return v.pieces[i]
    if isinstance(v, (list, tuple)):
        return type(v)(_on_piece(u, i) for u in v)
    return v


def _buckets(v: Any) -> list[Bucket]:
    if isinstance(v, Bucket):
        return [v]
    if isinstance(v, (list, tuple)):
        return [b for u in v for b in _buckets(u)]
    return []


def has_bucket(args: Any, kwargs: Mapping[str, Any]) -> bool:
    return bool(_buckets(args) or _buckets(list(kwargs.values())))


def _positional(v: Any) -> bool:
    """Whether ``v`` holds a value with dims that is no bucket (read entry by entry by
    position, not piece by piece)."""
    if isinstance(v, Bucket):
        return False
    if isinstance(v, (list, tuple)):
        return any(_positional(u) for u in v)
    return bool(getattr(v, "dims", None))


def _piecewise(ctx: Any, n: fx.Node, r: Any, args: tuple, kwargs: dict) -> Any:
    bs = _buckets(args) + _buckets(list(kwargs.values()))
    first = bs[0]
    if any([p.dims for p in b.pieces] != [p.dims for p in first.pieces] for b in bs):
        raise ctx.fail(n, "an elementwise op of two flat buckets of different pieces")
    if _positional(list(args) + list(kwargs.values())):   # a tensor that is no bucket
        raise ctx.fail(n, _WHY)
    outs = []
    for i, p in enumerate(first.pieces):
        got = r.term(n, ctx, *_on_piece(args, i), **_on_piece(kwargs, i))
        got = got[0][0] if isinstance(got, tuple) and isinstance(got[0], list) else got
        if not isinstance(got, TV):
            raise ctx.fail(n, _WHY)
        if not {d.name for d in got.term.dims} <= {d.name for d in p.dims[0]}:
            raise ctx.fail(n, "internal: an op on a piece of a flat bucket gave other dims")
        outs.append(TV(got.term, p.dims))
    out = Bucket(tuple(outs), first.numels)
    return ([out], None) if str(n.target) == "c10d.allreduce_.default" else out


def lower_on_bucket(ctx: Any, n: fx.Node, r: Any, args: tuple, kwargs: dict) -> Any:
    """The value of node ``n`` (rule ``r``) some of whose arguments are buckets (module
    docstring).

    Raises:
        Unsupported: any other use of a bucket.
    """
    name = str(n.target)
    if name == "aten.slice.Tensor" and isinstance(args[0], Bucket) and not kwargs:
        return _slice(ctx, n, args[0])
    if name in ("aten.split_with_sizes.default", "aten.split.Tensor") \
            and isinstance(args[0], Bucket):
        return _split(ctx, n, args[0])
    if name in _VIEWS and isinstance(args[0], Bucket):
        if shape_of(n) != (args[0].total,):
            raise ctx.fail(n, "a view of a flat bucket to another shape than its own")
        return args[0]
    if name == "aten.copy_.default" and isinstance(args[1], Bucket) and len(args) == 2:
        if shape_of(n.args[0]) != (args[1].total,):
            raise ctx.fail(n, "a copy of a flat bucket into a tensor of another shape")
        return args[1]
    if name in PIECEWISE:
        return _piecewise(ctx, n, r, args, kwargs)
    if name in FILLS and isinstance(args[0], Bucket) and not kwargs \
            and not has_bucket(args[1:], {}):
        return filled(ctx, n, r, args)
    raise ctx.fail(n, _WHY)


def filled(ctx: Any, n: fx.Node, r: Any, args: tuple) -> Bucket:
    """``flat.zero_()`` / ``flat.fill_(v)`` of bucket ``args[0]`` (:data:`FILLS`, R37b-4): the
    bucket of the one constant ``r.term`` gives (a term of no dims), on each piece's layout.
    The write itself goes through ``lower._write_back``: whole aliases read this bucket, the
    piece views pass 1 named read its pieces (:func:`piece_read`), every other view stays
    Opaque.

    Raises:
        Unsupported: a fill value the rule refuses (rank-dependent, a cast), or one with dims.
    """
    x = args[0]
    got = r.term(n, ctx, *args)
    if not isinstance(got, TV) or got.term.dims:
        raise ctx.fail(n, _WHY)
    return Bucket(tuple(TV(got.term, p.dims) for p in x.pieces), x.numels)


def written_value(ctx: Any, reader: fx.Node, v: Bucket, why: Any) -> Any:
    """What ``reader``, an alias of the whole storage an op wrote bucket ``v`` into, reads:
    the bucket where its shape is the bucket's; ``why`` (an Opaque) otherwise."""
    return v if shape_of(reader) == (v.total,) else why


def piece_write(ctx: Any, t: fx.Node, v: Any, whole: Any, views: Any) -> Bucket | None:
    """The storage's new value after an in-place op wrote ``v`` into ``t`` through one piece
    of a flat bucket (R36b-3: ``p.grad = flat[a:b].view_as(p)``, then a second micro-batch's
    ``p.grad.add_(g)``; Megatron's ``main_grad.add_(grad)``): the bucket with piece ``k``
    replaced by ``v``, when ``t`` is, through nodes ``views(x)`` says relabel (:func:`along`),
    a slice
    marked as piece ``k`` or item ``k`` of a split into the pieces, of a node ``whole(x)`` says
    sees all of the storage and whose value is a :class:`Bucket` (the bounds checked against
    it at the probe and the real sizes as :func:`_slice` / :func:`_split` do), and ``v`` is a
    value of exactly the piece's named dims (each once). None for anything else: the caller
    leaves the storage's readers Opaque."""
    chain = [t]
    while chain[-1].args and isinstance(chain[-1].args[0], fx.Node) and views(chain[-1]):
        chain.append(chain[-1].args[0])
    s, marks = chain[-1], ctx.analysis.marks
    from spec_lang.torch_frontend.registry import Unsupported  # noqa: PLC0415
    if not isinstance(v, TV):
        return None
    try:
        if str(s.target) == "aten.slice.Tensor" and marks.get(s, ("",))[0] == "bucketslice" \
                and whole(s.args[0]):
            src = ctx.env.get(s.args[0])
            if not isinstance(src, Bucket) or shape_of(s.args[0]) != (src.total,):
                return None
            k, piece = marks[s][1], _slice(ctx, s, src)
        elif s.target is operator.getitem and isinstance(s.args[0], fx.Node) \
                and marks.get(s.args[0], ("",))[0] == "bucketsplit" and whole(s.args[0].args[0]):
            src = ctx.env.get(s.args[0].args[0])
            if not isinstance(src, Bucket) or shape_of(s.args[0].args[0]) != (src.total,):
                return None
            k = s.args[1]
            piece = _split(ctx, s.args[0], src).values[k]
        else:
            return None
    except Unsupported:
        return None
    if src.pieces[k] is not piece:
        return None
    want = [d.name for d in piece.dims[0]]
    got = [d for dim in ctx.layout(t) for d in dim]
    if len(set(want)) != len(want) or sorted(d.name for d in got) != sorted(want) \
            or set(got) != set(piece.dims[0]) or tuple(v.dims) != tuple(ctx.layout(t)) \
            or not {d.name for d in v.term.dims} <= set(want):
        return None
    pieces = list(src.pieces)
    pieces[k] = TV(v.term, piece.dims)
    return Bucket(tuple(pieces), src.numels)
