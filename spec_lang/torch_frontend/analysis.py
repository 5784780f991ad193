"""Pass 1 of the lowering: the named dims (atoms) of every node of a captured graph.

Walks the graph in program order and applies each op's ``dims`` rule
(:mod:`spec_lang.torch_frontend.registry`) to the :class:`~spec_lang.torch_frontend.dims.Dims`
union-find. Inputs are seeded by the caller (:class:`Seeds`): fresh atoms keyed by the input and
dim for the spec, the spec's atoms through each input's placements for a plan.

The result maps every node to its layout (per torch dim, a list of atoms); ``canon`` gives the
leaves after every unification and split. A node whose op has no rule keeps fresh atoms and is
listed in ``unsupported`` (pass 2 turns it into UNKNOWN goals).
"""

from __future__ import annotations

import functools
import operator
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx

from spec_lang.torch_frontend.dims import Atom, Dims, DimsError, Marks
from spec_lang.torch_frontend.registry import RULES

__all__ = ["Analysis", "analyse", "shape_of", "fresh_layout", "node_site", "record_node_site",
           "IGNORED", "LAYOUT_ONLY", "DATA_MOVEMENT", "semantic_nodes", "is_data_movement",
           "align_sizes", "move_kind", "RESHAPES"]

Layout = list[list[Atom]]

IGNORED = frozenset({
    "profiler._record_function_enter_new.default",
    "profiler._record_function_exit._RecordFunction",
})
"""Ops with no value (profiler ranges the optimizer opens)."""


_EMPTY = frozenset({"aten.empty_strided.default", "aten.empty.memory_format"})
_UNINITIALISED = ("the values of an uninitialised tensor (torch.empty: e.g. a receive buffer "
                  "torch's pipeline metadata inference runs a stage's forward on) are not known")


LAYOUT_ONLY = frozenset({
    "aten.view.default", "aten._unsafe_view.default", "aten._reshape_alias.default",
    "aten.clone.default",
    "aten.detach.default", "aten.alias.default", "aten.t.default", "aten.transpose.int",
    "aten.permute.default", "aten.unsqueeze.default", "aten.squeeze.dim",
    "aten.squeeze.dims", "aten.squeeze.default", "aten.expand.default",
})
"""Ops that only move data: torch picks between them by memory layout, which can depend on
the sizes (``reshape`` of a size-1 head dim is a ``view``, of a longer one ``clone`` +
``_unsafe_view``). Traces of one program are aligned on the other nodes."""


DATA_MOVEMENT = LAYOUT_ONLY | {"aten.split.Tensor", "aten.cat.default", "aten.slice.Tensor",
                               "aten.select.int"}
"""Ops that only move data. A redistribution's layout shuffle around a collective is one of
them, and DTensor skips it when a dim has size 1 (a batch of one sequence per rank at real
sizes): traces at different sizes are aligned on the other nodes."""


def is_data_movement(n: fx.Node) -> bool:
    if n.op != "call_function":
        return False
    if n.target is operator.getitem:
        src = n.args[0]
        return isinstance(src, fx.Node) and str(src.target) == "aten.split.Tensor"
    return str(n.target) in DATA_MOVEMENT


def semantic_nodes(gm: Any) -> list[fx.Node]:
    """The nodes of ``gm`` that compute (not :data:`DATA_MOVEMENT`), in order."""
    return [n for n in gm.graph.nodes if not is_data_movement(n)]


IDENTITY_MOVES = frozenset({"aten.clone.default", "aten.detach.default", "aten.alias.default"})
"""Data movement that returns its input's values unchanged (a copy or an alias)."""

RESHAPES = frozenset({"aten.view.default", "aten._unsafe_view.default",
                      "aten._reshape_alias.default"})
"""The spellings of one ``reshape`` torch picks between by memory layout (argument 1 is the
shape)."""


def move_kind(n: fx.Node) -> Any:
    """What data movement node ``n`` does, the same for the spellings of one op: ``None`` for
    the identity (:data:`IDENTITY_MOVES`), ``"reshape"`` for :data:`RESHAPES`, else its
    target."""
    t = str(n.target)
    if t in IDENTITY_MOVES:
        return None
    return "reshape" if t in RESHAPES else n.target


def align_sizes(probe: list[fx.Node], real: list[fx.Node]
                ) -> tuple[dict[fx.Node, fx.Node], list[fx.Node], list[fx.Node]]:
    """Two traces of one program at probe and at real sizes aligned node by node (R24-1).

    The computing nodes align one to one. Between two computing nodes, torch may spell the
    same data movement differently at two sizes (``clone`` + ``_unsafe_view`` against
    ``view``): the data-movement nodes of each segment align by :func:`move_kind`, the
    identities left out, when both segments do the same moves in the same order (node for
    node, identities included, when the two segments run the same ops).

    Returns:
        ``(aligned, loose_probe, loose_real)``: probe node -> real node for the computing nodes
        and the aligned moves; the data-movement nodes with no counterpart (every identity, and
        every move of a segment whose moves differ), in order.

    Raises:
        ValueError: the computing nodes differ (op or count).
    """
    def segments(nodes: list[fx.Node]) -> tuple[list[fx.Node], list[list[fx.Node]]]:
        sem: list[fx.Node] = []
        moves: list[list[fx.Node]] = [[]]
        for n in nodes:
            if is_data_movement(n):
                moves[-1].append(n)
            else:
                sem.append(n)
                moves.append([])
        return sem, moves

    sp, mp = segments(probe)
    sr, mr = segments(real)
    if len(sp) != len(sr) or any(x.op != y.op or x.target != y.target for x, y in zip(sp, sr)):
        raise ValueError("the computing nodes differ at the real sizes")
    aligned = dict(zip(sp, sr))
    loose_p: list[fx.Node] = []
    loose_r: list[fx.Node] = []
    for a, b in zip(mp, mr):
        if len(a) == len(b) and all(x.target == y.target for x, y in zip(a, b)):
            aligned.update(zip(a, b))
            continue
        ka = [x for x in a if move_kind(x) is not None]
        kb = [y for y in b if move_kind(y) is not None]
        if len(ka) == len(kb) and all(move_kind(x) == move_kind(y) for x, y in zip(ka, kb)):
            aligned.update(zip(ka, kb))
            loose_p += [x for x in a if move_kind(x) is None]
            loose_r += [y for y in b if move_kind(y) is None]
        else:
            loose_p += a
            loose_r += b
    return aligned, loose_p, loose_r


def shape_of(n: fx.Node, i: int | None = None) -> tuple[int, ...]:
    v = n.meta.get("val")
    if i is not None:
        v = v[i]
    return tuple(int(s) for s in v.shape)


# torch's package and this front end's: their frames are not the user's. A directory of the
# user's that is merely *named* torch or torch_frontend (examples/torch/, tests/torch_frontend/)
# is the user's code.
_LIBRARY_DIRS = tuple(os.path.dirname(os.path.realpath(f)) + os.sep
                      for f in (torch.__file__, __file__))


@functools.lru_cache(maxsize=4096)
def _realpath(f: str) -> str:
    """``os.path.realpath``, once per file name (node_site reads every frame of every node)."""
    return os.path.realpath(f)


def node_site(n: fx.Node, path: str | None = None) -> str:
    """``file:line`` of the deepest frame of ``n``'s stack trace in the user's train file (or
    any frame outside torch and this package when ``path`` is None or absent)."""
    st = n.meta.get("stack_trace") or ""
    frames = []
    for ln in st.splitlines():
        ln = ln.strip()
        if ln.startswith('File "'):
            try:
                f = ln.split('"', 2)[1]
                line = int(ln.split("line ", 1)[1].split(",", 1)[0])
            except (IndexError, ValueError):
                continue
            frames.append((f, line))
    if path is not None:
        want = _realpath(path)
        mine = [fr for fr in frames if _realpath(fr[0]) == want]
        if mine:
            return f"{path}:{mine[-1][1]}"
    user = [fr for fr in frames if not _realpath(fr[0]).startswith(_LIBRARY_DIRS)]
    if user:
        return f"{user[-1][0]}:{user[-1][1]}"
    return f"<graph node {n.name}>"


def record_node_site(n: fx.Node, t: Any, sited: set[int] | None) -> None:
    """Keep on ``t`` the deepest user ``file:line`` of ``n`` (the model's own line, a hook's),
    for messages only (``proofs/divergence.py``). The spec's lowering (``sited`` None) and the
    plan's each keep their first site; the plan's replaces the spec's on a hash-consed term both
    build (``sited``: the ids of the terms the plan has sited)."""
    from spec_lang.tensor import record_site

    site = node_site(n) if hasattr(n, "meta") else "<no node>"   # (a test's stand-in node)
    if site.startswith("<"):
        return
    if sited is None:
        record_site(t, site)
    elif id(t) not in sited:
        sited.add(id(t))
        record_site(t, site, first=False)


def fresh_layout(d: Dims, shape: Sequence[int], where: str) -> Layout:
    return [[] if s == 1 else [d.fresh(s, where)] for s in shape]


@dataclass
class Analysis:
    """Pass 1's result for one trace."""

    gm: Any
    dims: Dims
    layouts: dict[fx.Node, Any]
    unsupported: dict[fx.Node, str] = field(default_factory=dict)
    # index inputs: placeholder -> the atom their values index (vocab), from embedding / nll
    index_range: dict[fx.Node, Atom] = field(default_factory=dict)
    path: str | None = None
    groups: dict[str, str] = field(default_factory=dict)   # process-group name -> mesh axis
    # facts rules leave for later rules: ("rankpiece", axis, i) on (split node, i),
    # ("chunkstack", y, dim, parts) on a cat node
    marks: Marks = field(default_factory=Marks)

    def layout(self, n: Any) -> Any:
        return self.layouts[n]

    def canon(self, layout: Layout) -> Layout:
        return [self.dims.canon(dim) for dim in layout]

    def where(self, n: fx.Node) -> str:
        return f"{node_site(n, self.path)} ({n.target if n.op == 'call_function' else n.op} "\
               f"{n.name})"

    def same(self, d1: list[Atom], d2: list[Atom], n: fx.Node) -> None:
        self.dims.same(d1, d2, self.where(n))

    def index_of(self, idx: Any, rng: list[Atom], n: fx.Node) -> None:
        """``idx``'s integer values index the dim ``rng`` (embedding rows, class labels): record
        it on the placeholder ``idx`` comes from (through elementwise integer ops)."""
        if len(rng) != 1:
            rng = [self.dims._merged(self.dims.canon(rng), self.where(n))]  # noqa: SLF001
        src = _index_source(idx)
        if src is None:
            return
        prev = self.index_range.get(src)
        if prev is None:
            self.index_range[src] = rng[0]
        else:
            self.dims.same([prev], rng, self.where(n))


def _index_source(x: Any) -> fx.Node | None:
    """The placeholder an integer tensor is computed from (walking the first tensor argument of
    integer ops: ``sub``, ``where``, ``clone``, ``index_put_``, views)."""
    seen = 0
    while isinstance(x, fx.Node) and seen < 64:
        if x.op == "placeholder":
            return x
        if x.op != "call_function":
            return None
        nxt = None
        for a in x.args:
            if isinstance(a, fx.Node) and _is_int(a):
                nxt = a
                break
        x = nxt
        seen += 1
    return None


def _is_int(n: fx.Node) -> bool:
    v = n.meta.get("val")
    return isinstance(v, torch.Tensor) and not v.dtype.is_floating_point and v.dtype != torch.bool


def analyse(gm: Any, seeds: Callable[[int, fx.Node, Dims], Layout], dims: Dims,
            path: str | None = None, groups: dict[str, str] | None = None,
            rank_blocks: dict[fx.Node, str] | None = None) -> Analysis:
    """Run pass 1 over ``gm``; ``seeds(i, placeholder, dims)`` gives input ``i``'s layout.

    Raises:
        DimsError: a node's dims cannot be named (the message names the user's line).
        Refine: a plan view splits a spec atom (the caller re-analyses the spec).
    """
    a = Analysis(gm, dims, {}, path=path, groups=dict(groups or {}))
    i = 0
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            a.layouts[n] = seeds(i, n, dims)
            # two dims of one input are never one named dim (a square weight: twins)
            dims.mark_apart([x for d in (a.layouts[n] or ()) for x in dims.canon(d)])
            i += 1
        elif n.op == "get_attr":
            v = getattr(gm, n.target)
            a.layouts[n] = fresh_layout(dims, tuple(v.shape), a.where(n)) \
                if isinstance(v, torch.Tensor) else None
        elif n.op == "call_function":
            if n.target is operator.getitem:
                src = a.layouts[n.args[0]]
                a.layouts[n] = src[n.args[1]] if src is not None else None
                if rank_blocks and n in rank_blocks and a.layouts[n] is not None:
                    _rank_block(a, n, rank_blocks[n])
                continue
            name = str(n.target)
            if name in IGNORED:
                a.layouts[n] = None
                continue
            r = RULES.get(name)
            if r is None:
                a.unsupported[n] = _UNINITIALISED if name in _EMPTY else "no lowering rule"
                a.layouts[n] = _fresh_of(dims, n, a)
                continue
            try:
                with dims.transaction(a.marks):      # a failed rule leaves nothing (R53a-1)
                    a.layouts[n] = _decopy(a, _dedupe(a, r.dims(n, a), n))
            except DimsError as e:   # the reason without the site the message adds (R53a-2)
                a.unsupported[n] = str(e).removeprefix(f"{a.where(n)}: ")
                a.layouts[n] = _fresh_of(dims, n, a)
    return a


def _dedupe(a: Analysis, lay: Any, n: fx.Node) -> Any:
    """A layout holding one named dim twice (``q @ k^T`` of self-attention: positions by
    positions) keeps the first and gets a copy of it for the others (see ``Dims.copy``), or
    its one twin (``Dims.twin_for``: the gradient of a square weight applied to its own
    output)."""
    if not isinstance(lay, list) or not all(
            isinstance(d, list) and all(isinstance(x, Atom) for x in d) for d in lay):
        return lay
    seen: set[int] = set()
    infos: set[Any] = set()        # a plan's classes of one lineage are one IR name
    keys: set[str] = set()         # ... and of one spec key, sharded or not, too (R30b-3)
    out = []
    for dim in lay:
        atoms = a.dims.canon(dim)
        new = []
        for x in atoms:
            r = a.dims.find(x)
            every = [y for d in lay for y in d]
            if id(r) in seen or (r.info is not None and r.info in infos):
                # a square weight's dim twice (its gradient): its twin, else a copy
                tw = a.dims.twin_for(r, every, a.where(n))
                x = tw if tw is not None else a.dims.copy(r, a.where(n))
                r = a.dims.find(x)
            elif r.info is not None and r.info[0] in keys:
                # a block and the whole of one key (a sharded square weight's gradient:
                # the rank's block of the output dim, all of the input dim): its twin, else
                # left (one IR name twice: refused)
                tw = a.dims.twin_for(r, every, a.where(n))
                if tw is not None:
                    x, r = tw, a.dims.find(tw)
            seen.add(id(r))
            if r.info is not None:
                infos.add(r.info)
                keys.add(r.info[0])
            new.append(x)
        out.append(new)
    return out


def _rank_block(a: Analysis, n: fx.Node, axis: str) -> None:
    """``n`` is block ``r`` of a split on the rank with coordinate ``r`` on ``axis`` (found by
    aligning the ranks' traces): its block dim is the rank's shard of the split dim."""
    for dim in a.layouts[n]:
        for x in dim[:1]:
            if x.piece is None:
                continue
            parent, _, parts = x.piece
            info = a.dims.info(parent)
            if info is not None and parts == a.dims.axis_sizes.get(axis):
                r = a.dims.find(x)
                if r.info is None:
                    r.info = (info[0], info[1] + (axis,))


def _decopy(a: Analysis, lay: Any) -> Any:
    """A copy of a named dim in a layout that does not hold the dim itself is the dim: copies
    live only where both meet (the attention scores), so the values on either side of them are
    named alike in the spec and the plan."""
    if not isinstance(lay, list) or not all(
            isinstance(d, list) and all(isinstance(x, Atom) for x in d) for d in lay):
        return lay
    roots = {id(a.dims.find(x)) for d in lay for x in d}
    out = []
    for d in lay:
        new = []
        for x in d:
            r = a.dims.find(x)
            if r.copy_of is not None:
                base = a.dims.copy_root(r)
                if id(base) not in roots:
                    x = base
            new.append(x)
        out.append(new)
    return out


def _fresh_of(dims: Dims, n: fx.Node, a: Analysis) -> Any:
    v = n.meta.get("val")
    if isinstance(v, torch.Tensor):
        return fresh_layout(dims, tuple(v.shape), a.where(n))
    if isinstance(v, (list, tuple)):
        return [fresh_layout(dims, tuple(x.shape), a.where(n)) if isinstance(x, torch.Tensor)
                else None for x in v]
    return None
