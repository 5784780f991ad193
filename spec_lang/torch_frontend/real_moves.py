"""The data movement at the real sizes is the probe trace's (adversarial finding R24-1).

The plan is lowered from its probe trace; the trace at the real sizes was aligned with it on
computing nodes only, so a move that differs only at the real sizes (a ``select`` index, a
``slice`` one block later, a ``t()`` taken only when a gradient is square there) was never
compared, and the probe trace's program was proved. :func:`check_real_moves` compares them:

* a move aligned with its twin (:func:`~spec_lang.torch_frontend.analysis.align_sizes`) must
  mean the same at the two sizes: the same dims (negative ones normalised), the same block of a
  ``slice`` (``rules_layout._slice_block``: block ``index`` of ``parts`` equal blocks, as the
  lowering reads it), the same entry of a ``select``, the same number of equal blocks of a
  ``split`` and the same piece of it. The shape of a reshape or an ``expand`` is its output's,
  which ``naming.solve_real_sizes`` checks against the named dims;
* where the moves of the two traces differ (torch spells one program differently at two sizes:
  DTensor skips the all-gather's split-and-cat shuffle when the batch per rank is 1 at the real
  sizes), every argument of a computing node that such a move feeds is compared *by value* at
  the real sizes: each side's chain of moves from its source is composed into a strided layout
  (per dim, row-major modes ``(size, stride)`` over the source's entries, and an offset),
  with the probe side's sizes taken from its named dims at the real sizes; the two sources must
  be twins and the canonical layouts (size-1 modes dropped, adjacent modes merged) equal. A
  move outside this algebra (a ``cat`` of several sources, a ``slice`` that is not a block)
  makes the chain unknown and the plan is refused.
* a ``slice`` that is a piece of a flat bucket (:mod:`~spec_lang.torch_frontend.buckets`) is
  compared as it is lowered: its twin must take the piece's entries at the real sizes.

Anything else raises :class:`~spec_lang.torch_frontend.literals.GraphMismatch` naming the node,
the argument and the user's ``file:line``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from typing import Any

import torch.fx as fx

from spec_lang.torch_frontend.analysis import is_data_movement, move_kind, node_site
from spec_lang.torch_frontend.literals import GraphMismatch

__all__ = ["check_real_moves", "move_meaning"]

Shape = tuple[int, ...]
ShapeOf = Callable[[fx.Node, "int | None"], "Shape | None"]
Mode = tuple[int, int]                     # (size, stride)
Layout = tuple[tuple[tuple[Mode, ...], ...], int]     # (per dim, its modes), offset

_DIM_ARG = {"aten.transpose.int": (1, 2), "aten.unsqueeze.default": (1,),
            "aten.squeeze.dim": (1,), "aten.cat.default": (1,), "aten.slice.Tensor": (1,),
            "aten.select.int": (1,), "aten.split.Tensor": (2,)}


def _val_shape(n: fx.Node, i: int | None = None) -> Shape | None:
    v = n.meta.get("val")
    if i is not None:
        v = v[i] if isinstance(v, (list, tuple)) and i < len(v) else None
    return tuple(int(s) for s in v.shape) if hasattr(v, "shape") else None


def _norm(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


def move_meaning(n: fx.Node, shape_in: Shape | None) -> tuple:
    """What move ``n`` does, in terms that hold at every size (``shape_in``: the shape of its
    input at the size of its trace); two twins must agree on it."""
    from spec_lang.torch_frontend.rules_layout import _slice_block  # noqa: PLC0415

    t = str(n.target)
    kind = move_kind(n)
    if kind is None or kind == "reshape" or t == "aten.expand.default":
        return (kind,)
    if n.target is operator.getitem:
        return ("getitem", n.args[1])
    rank = len(shape_in) if shape_in is not None else 0
    if t == "aten.unsqueeze.default":
        return (t, _norm(n.args[1], rank + 1))
    if t == "aten.permute.default":
        return (t, tuple(_norm(d, rank) for d in n.args[1]))
    if t == "aten.squeeze.dims":
        return (t, tuple(sorted(_norm(d, rank) for d in n.args[1])))
    if t == "aten.cat.default":
        first = _val_shape(n.args[0][0]) if n.args[0] else None
        d = n.args[1] if len(n.args) > 1 else n.kwargs.get("dim", 0)
        return (t, len(n.args[0]), _norm(d, len(first) if first else 0))
    dims = tuple(_norm(n.args[k] if k < len(n.args) else 0, rank) for k in _DIM_ARG.get(t, ()))
    if t == "aten.slice.Tensor" and shape_in is not None:
        return (t, dims, _slice_block(n, shape_in[dims[0]]))
    if t == "aten.select.int":
        return (t, dims, n.args[2])
    if t == "aten.split.Tensor":
        outs = n.meta.get("val") or ()
        sizes = {int(o.shape[dims[0]]) for o in outs}
        return (t, dims, len(outs), len(sizes) == 1)
    return (t, dims)


# -- strided layouts of a chain of moves ---------------------------------------------------------

def _row_major(shape: Shape) -> Layout:
    dims, stride = [], 1
    for s in reversed(shape):
        dims.append(((s, stride),) if s != 1 else ())
        stride *= s
    return tuple(reversed(dims)), 0


def _size(modes: tuple[Mode, ...]) -> int:
    out = 1
    for m, _ in modes:
        out *= m
    return out


def _reshape(lay: Layout, shape: Shape) -> Layout | None:
    modes = [m for dim in lay[0] for m in dim if m[0] != 1]
    out = []
    for n in shape:
        take: list[Mode] = []
        need = n
        while need > 1:
            if not modes:
                return None
            m, s = modes.pop(0)
            if need % m == 0:
                take.append((m, s))
                need //= m
            elif m % need == 0:
                take.append((need, s * (m // need)))
                modes.insert(0, (m // need, s))
                need = 1
            else:
                return None
        out.append(tuple(take))
    return (tuple(out), lay[1]) if not modes else None


def _sub(modes: tuple[Mode, ...], start: int, length: int) -> tuple[tuple[Mode, ...], int] | None:
    """Entries ``[start, start + length)`` of a row-major dim: (its modes, the offset added)."""
    if start == 0 and length == _size(modes):
        return modes, 0
    if not modes or length <= 0:
        return None
    (m0, s0), rest = modes[0], modes[1:]
    inner = _size(rest)
    if start % inner == 0 and length % inner == 0:
        return ((length // inner, s0),) + rest, (start // inner) * s0
    q = start // inner
    if q == (start + length - 1) // inner:        # within one outer entry
        got = _sub(rest, start - q * inner, length)
        return None if got is None else (got[0], got[1] + q * s0)
    return None


def _canonical(lay: Layout) -> Layout:
    dims = []
    for dim in lay[0]:
        out: list[Mode] = []
        for m, s in dim:
            if m == 1:
                continue
            if out and out[-1][1] == m * s:
                out[-1] = (out[-1][0] * m, s)
            else:
                out.append((m, s))
        dims.append(tuple(out))
    return tuple(dims), lay[1]


class _Side:
    """One trace's view of its moves at the real sizes: the real trace reads its own literals
    and shapes; the probe trace its named dims' real sizes (``shape``) and its moves' meaning
    (``rules_layout``: a slice is a block of equal blocks)."""

    def __init__(self, shape: ShapeOf, real: bool):
        self.shape = shape
        self.real = real
        self.memo: dict[fx.Node, tuple[fx.Node, Layout] | None] = {}

    def chain(self, n: Any) -> tuple[fx.Node, Layout] | None:
        """(source, layout of ``n`` over the source's entries) at the real sizes, or None."""
        if not isinstance(n, fx.Node):
            return None
        if n not in self.memo:
            self.memo[n] = None           # a cycle (there is none in a graph) stays unknown
            try:
                self.memo[n] = self._chain(n)
            except (IndexError, TypeError, ValueError, ZeroDivisionError):
                self.memo[n] = None
        return self.memo[n]

    def _chain(self, n: fx.Node) -> tuple[fx.Node, Layout] | None:
        if not is_data_movement(n):
            s = self.shape(n, None)
            return None if s is None else (n, _row_major(s))
        if n.target is operator.getitem:
            return self._piece(n)
        t = str(n.target)
        if t == "aten.cat.default":
            return self._cat(n)
        got = self.chain(n.args[0])
        if got is None or t == "aten.split.Tensor":
            return None
        src, (dims_t, off) = got
        dims = list(dims_t)
        rank = len(dims)
        out = self.shape(n, None)
        kind = move_kind(n)
        if kind is None:
            return got
        if kind == "reshape":
            lay = None if out is None else _reshape((tuple(dims), off), out)
            return None if lay is None else (src, lay)
        if t == "aten.expand.default":
            if out is None or len(out) < rank:
                return None
            dims = [()] * (len(out) - rank) + dims
            new = []
            for dim, s in zip(dims, out):
                if _size(dim) == s:
                    new.append(dim)
                elif _size(dim) == 1:
                    new.append(((s, 0),) if s != 1 else ())
                else:
                    return None
            dims = new
        elif t == "aten.t.default":
            dims = dims[::-1] if rank == 2 else dims
        elif t == "aten.transpose.int":
            i, j = _norm(n.args[1], rank), _norm(n.args[2], rank)
            dims[i], dims[j] = dims[j], dims[i]
        elif t == "aten.permute.default":
            dims = [dims[_norm(d, rank)] for d in n.args[1]]
        elif t == "aten.unsqueeze.default":
            dims.insert(_norm(n.args[1], rank + 1), ())
        elif t.startswith("aten.squeeze."):
            want = (set(range(rank)) if t == "aten.squeeze.default" else
                    {_norm(n.args[1], rank)} if t == "aten.squeeze.dim" else
                    {_norm(d, rank) for d in n.args[1]})
            dims = [dim for k, dim in enumerate(dims) if not (k in want and _size(dim) == 1)]
        elif t in ("aten.slice.Tensor", "aten.select.int"):
            d = _norm(n.args[1] if len(n.args) > 1 else 0, rank)
            rng = self._range(n, d, _size(dims[d]))
            sub = None if rng is None else _sub(dims[d], *rng)
            if sub is None:
                return None
            off += sub[1]
            if t == "aten.select.int":
                dims = dims[:d] + dims[d + 1:]
            else:
                dims[d] = sub[0]
        else:
            return None
        lay = (tuple(dims), off)
        if out is not None and tuple(_size(dim) for dim in dims) != tuple(out):
            return None
        return src, lay

    def _range(self, n: fx.Node, d: int, size: int) -> tuple[int, int] | None:
        """(start, length) at the real sizes of the entries a slice or select takes of dim
        ``d`` (``size`` entries at the real sizes)."""
        from spec_lang.torch_frontend.rules_layout import _slice_block  # noqa: PLC0415

        if str(n.target) == "aten.select.int":
            i = n.args[2]
            i = i + size if i < 0 else i
            return (i, 1) if 0 <= i < size else None
        if self.real:
            start = n.args[2] if len(n.args) > 2 and n.args[2] is not None else 0
            end = n.args[3] if len(n.args) > 3 and n.args[3] is not None else size
            step = n.args[4] if len(n.args) > 4 else 1
            start = max(0, start + size if start < 0 else start)
            end = min(size, end + size if end < 0 else end)
            return (start, end - start) if step == 1 and end > start else None
        probe_in = _val_shape(n.args[0])
        if probe_in is None:
            return None
        full, parts, index = _slice_block(n, probe_in[d])
        if full:
            return 0, size
        if parts is None or size % parts:
            return None
        return index * (size // parts), size // parts

    def _piece(self, n: fx.Node) -> tuple[fx.Node, Layout] | None:
        split = n.args[0]
        if not (isinstance(split, fx.Node) and str(split.target) == "aten.split.Tensor"):
            return None
        got = self.chain(split.args[0])
        if got is None:
            return None
        src, (dims_t, off) = got
        dims = list(dims_t)
        d = _norm(split.args[2] if len(split.args) > 2 else 0, len(dims))
        i = n.args[1]
        pieces = [self.shape(split, j) for j in range(i + 1)]
        if any(p is None for p in pieces):
            return None
        start = sum(p[d] for p in pieces[:i])
        sub = _sub(dims[d], start, pieces[i][d])
        if sub is None:
            return None
        dims[d] = sub[0]
        return src, (tuple(dims), off + sub[1])

    def _cat(self, n: fx.Node) -> tuple[fx.Node, Layout] | None:
        got = [self.chain(p) for p in n.args[0]]
        if not got or any(g is None for g in got) or len({g[0] for g in got}) != 1:
            return None
        src = got[0][0]
        lays = [g[1] for g in got]
        if len(lays) == 1:
            return src, lays[0]
        dims0 = lays[0][0]
        d = _norm(n.args[1] if len(n.args) > 1 else n.kwargs.get("dim", 0), len(dims0))
        step = lays[1][1] - lays[0][1]
        if step == 0 or any(lay[0] != dims0 or lay[1] != lays[0][1] + k * step
                            for k, lay in enumerate(lays)):
            return None
        dims = list(dims0)
        dims[d] = ((len(lays), step),) + dims0[d]
        return src, (tuple(dims), lays[0][1])


def _node_args(x: fx.Node, y: fx.Node) -> Iterator[tuple[str, Any, Any]]:
    """The arguments of two twins side by side (``args[k]`` and kwargs, lists item by item)."""
    def walk(key: str, a: Any, b: Any) -> Iterator[tuple[str, Any, Any]]:
        if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
            for j, (u, v) in enumerate(zip(a, b)):
                yield from walk(f"{key}[{j}]", u, v)
        elif isinstance(a, fx.Node) or isinstance(b, fx.Node) \
                or isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
            yield key, a, b           # (lists of two lengths: compared whole, below)
    for k, (a, b) in enumerate(zip(x.args, y.args)):
        yield from walk(str(k), a, b)
    for k in sorted(set(x.kwargs) & set(y.kwargs)):
        yield from walk(k, x.kwargs[k], y.kwargs[k])


def _mismatch(x: fx.Node, path: str, what: str) -> GraphMismatch:
    return GraphMismatch(f"{node_site(x, path)}: {what}: the program's data movement depends "
                         "on the sizes")


def check_real_moves(tr: Any, path: str, probe_shape: ShapeOf) -> None:
    """Check the main trace's moves at the real sizes against its probe trace's (module
    docstring). ``tr``: the :class:`~spec_lang.torch_frontend.literals.Traces` (its ``twins``
    and ``loose_moves``); ``probe_shape(node, i)``: a probe node's shape at the real sizes from
    its named dims (None when unknown). Called once the real sizes are solved.

    Raises:
        GraphMismatch: naming the node, the argument and the user's ``file:line``.
    """
    if tr.real is None:
        return
    for x, y in tr.twins.items():
        if x.op != "call_function" or not is_data_movement(x):
            continue
        if x.meta.get("bucket_piece") is not None:   # a piece of a flat bucket: its bounds at
            continue                 # the real sizes are checked as it is lowered (buckets)
        if move_meaning(x, _val_shape(x.args[0]) if isinstance(x.args[0], fx.Node) else None) \
                != move_meaning(y, _val_shape(y.args[0]) if isinstance(y.args[0], fx.Node)
                                else None):
            raise _mismatch(x, path, f"{x.target} ({x.name}) takes other entries at the real "
                            f"sizes ({_args_text(y)}) than at the probe sizes ({_args_text(x)})")
    loose = {n for n in (*tr.loose_moves[0], *tr.loose_moves[1]) if move_kind(n) is not None}
    probe, real = _Side(probe_shape, False), _Side(_val_shape, True)
    reach: dict[fx.Node, bool] = {}

    def touches(n: Any) -> bool:         # a chain of moves with a loose move in it
        if not isinstance(n, fx.Node) or not is_data_movement(n):
            return False
        if n not in reach:
            srcs = [n.args[0]] if n.target is operator.getitem else \
                list(n.args[0]) if isinstance(n.args[0], (list, tuple)) else [n.args[0]]
            reach[n] = n in loose or any(touches(s) for s in srcs)
        return reach[n]

    for x, y in tr.twins.items():
        # a move reads its twin's inputs (``_check_refs`` compares the *sets* of computing
        # nodes a value comes from, so ``cat([b, a])`` for ``cat([a, b])`` passed it); a
        # computing node's arguments are compared through their moves below
        for key, a, b in (_node_args(x, y) if x.op in ("call_function", "output") else ()):
            if not (isinstance(a, fx.Node) and isinstance(b, fx.Node)):
                if any(touches(n) for n in _flat(a) + _flat(b)):
                    raise _mismatch(x, path, f"argument {key} of {x.name} ({x.target}) holds "
                                    "other tensors at the real sizes than at the probe sizes")
                continue
            if not (touches(a) or touches(b)) and tr.twins.get(_bare(a)) is _bare(b):
                continue
            if is_data_movement(x):
                if touches(a) or touches(b):      # compared at the computing node it feeds
                    continue
                raise _mismatch(x, path, f"argument {key} of {x.name} ({x.target}) is another "
                                "value at the real sizes than at the probe sizes")
            pa, pb = probe.chain(a), real.chain(b)
            why = None
            if pa is None or pb is None:
                why = "cannot be followed through its moves"
            elif tr.twins.get(pa[0]) is not pb[0]:
                why = "comes from another node"
            elif _canonical(pa[1]) != _canonical(pb[1]):
                why = (f"takes its entries in another order (strided layouts "
                       f"{_canonical(pa[1])} and {_canonical(pb[1])})")
            if why is not None:
                raise _mismatch(x, path, f"argument {key} of {x.name} ({x.target}) is moved "
                                f"differently at the real sizes than at the probe sizes: at the "
                                f"real sizes it {why}")


def _args_text(n: fx.Node) -> str:
    return ", ".join(repr(a) if not isinstance(a, fx.Node) else a.name for a in n.args[1:])


def _flat(v: Any) -> list:
    if isinstance(v, (list, tuple)):
        return [n for x in v for n in _flat(x)]
    return [v] if isinstance(v, fx.Node) else []


def _bare(n: fx.Node) -> fx.Node:
    """``n`` without the identities (``clone``, ``detach``, ``alias``) it is made by."""
    while is_data_movement(n) and move_kind(n) is None and isinstance(n.args[0], fx.Node):
        n = n.args[0]
    return n
