"""Literals of the graph, read across the aligned traces of one program.

The same program is captured several times: at probe sizes on the rank whose graph is lowered,
at real sizes, and at probe sizes on other rank coordinates (every coordinate of each mesh
axis alone; on a small mesh every rank, :func:`~spec_lang.torch_frontend.traced_ranks.rank_coords`).
The graphs must be the same node for node (same ops in the same order); a python scalar
argument then is

* the same in every trace: a constant (:func:`~spec_lang.torch_frontend.values.exact_scalar`);
* different at probe and real sizes but the same on every rank: a *size literal*, lifted to the
  product of dim and axis sizes that gives both values (``div(x, 2431)`` =
  ``|B|/|dp| * |S| * |H|``), or UNKNOWN when no product does;
* different across ranks: a :class:`RankValues` (its values per coordinate of the one axis it
  depends on); only the rules that recognise the pattern accept it (vocab-parallel offsets are
  the block start of the rank's vocab shard), anything else is UNKNOWN.

A rank off the mesh's axes (a *corner*, e.g. ``(dp=1, tp=1)``) is traced only to be checked: every
literal, every block it reads and every process group must be what the ranks on the axes
predict (a literal of axis ``a`` has its value at the corner's coordinate on ``a``; one that is
the same on the axes is the same there), else the graphs mismatch (adversarial finding R3-2).

Process-group arguments are mapped to their mesh axis on every trace and must agree.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import torch.fx as fx

from spec_lang.term import Op, Term, term
from spec_lang.torch_frontend.analysis import align_sizes, node_site, semantic_nodes
from spec_lang.torch_frontend.captured_constants import (_skeleton, constant_differs_text,
                                                         held_text, same_constant)
from spec_lang.torch_frontend.values import ew, exact_scalar

__all__ = ["RankValues", "Traces", "GraphMismatch"]


class GraphMismatch(ValueError):
    """Two traces of one program differ in their ops (control flow on sizes or ranks);
    ``site``: the user's ``file:line`` of the first op that differs (None: not known)."""

    def __init__(self, msg: str, site: str | None = None) -> None:
        super().__init__(msg)
        self.site = site


@dataclass(frozen=True)
class RankValues:
    """A literal that depends on the rank's coordinate on ``axis``: ``values[r]`` for the
    traced coordinates ``r`` (``affine`` is ``(c0, k)`` when ``values[r] = c0 + k r`` holds on
    every traced coordinate, else None)."""

    axis: str
    values: dict[int, Any]
    affine: tuple[Fraction, Fraction] | None
    real: Any = None          # the value at real sizes on the main rank (None: not traced)
    # the values at real sizes on every traced coordinate of ``axis`` (R4-7 / round 32b
    # R32b-4: a rule that reads the probe values as ``r * n`` checks these as ``r * n_real``);
    # None when the other ranks were not traced at real sizes, {} when the node has no
    # counterpart there
    real_values: dict[int, Any] | None = None

    def is_the_rank(self) -> bool:
        """The coordinate itself (``0 + 1 r``), at probe sizes and on every rank traced at real
        sizes (a split block picked by the rank, ``_piece``)."""
        return self.affine == (0, 1) and self.real_fits(lambda r: r)

    def real_fits(self, want: Any) -> bool:
        """Whether the real-size values are ``want(r)`` on every traced coordinate ``r`` (true
        when the other ranks were not traced at real sizes: only the main rank's ``real`` is
        known then, checked by the rule)."""
        rv = self.real_values
        if rv is None:
            return True
        try:
            return set(rv) == set(self.values) and all(
                Fraction(v) == Fraction(want(r)) for r, v in rv.items())
        except (TypeError, ValueError):
            return False


def _arg(n: fx.Node, key: Any) -> Any:
    if isinstance(key, tuple):          # (argument, item) of a list argument
        v = _arg(n, key[0])
        return v[key[1]] if isinstance(v, (list, tuple)) and key[1] < len(v) else None
    if isinstance(key, int):
        return n.args[key] if key < len(n.args) else None
    return n.kwargs.get(key)


class Traces:
    """The traces of one program, aligned node by node (see the module docstring).

    ``main``: the graph module that is lowered; ``real``: the same at real sizes (or None);
    ``ranks``: ``(coords, graph module, groups)`` of the other traced ranks; ``coords`` and
    ``groups``: the main trace's.
    """

    def __init__(self, main: Any, coords: Mapping[str, int], groups: Mapping[str, str],
                 real: Any = None, real_groups: Mapping[str, str] | None = None,
                 ranks: Sequence[tuple[Mapping[str, int], Any, Mapping[str, str]]] = (),
                 real_ranks: Sequence[tuple[Mapping[str, int], Any]] = ()):
        self.main = main
        self.coords = dict(coords)
        self.groups = dict(groups)
        sem = semantic_nodes(main)
        full = list(main.graph.nodes)
        self.full_index = {n: i for i, n in enumerate(full)}     # for the other ranks
        self.real = semantic_nodes(real) if real is not None else None
        self.real_gm = real
        self.real_groups = dict(real_groups or groups)
        # the other ranks at real sizes (node lists)
        self.real_ranks = [(dict(c), list(gm.graph.nodes)) for c, gm in real_ranks]
        on_axes = [r for r in ranks if len(_moved(r[0], self.coords)) == 1]
        off_axes = [r for r in ranks if len(_moved(r[0], self.coords)) > 1]
        self.ranks = [(dict(c), list(gm.graph.nodes), dict(g)) for c, gm, g in on_axes]
        self.rank_gms = [gm for _, gm, _ in on_axes]
        # corners: checked against the prediction of the ranks on the axes, never lowered
        self.corners = [(dict(c), list(gm.graph.nodes), dict(g)) for c, gm, g in off_axes]
        self.corner_gms = [gm for _, gm, _ in off_axes]
        # probe node -> its node at real sizes, the data movement included (R24-1)
        self.twins: dict[fx.Node, fx.Node] = {}
        self.loose_moves: tuple[list[fx.Node], list[fx.Node]] = ([], [])
        if self.real is not None:
            _check_same(sem, self.real, "real sizes")
            _check_refs(sem, self.real, "real sizes", resolve=True)
            try:
                self.twins, *loose = align_sizes(full, list(real.graph.nodes))
            except ValueError as e:
                raise GraphMismatch(str(e)) from None
            self.loose_moves = (loose[0], loose[1])
        # the main trace's full index at probe sizes -> at real sizes (of the twins)
        real_index = {n: i for i, n in enumerate(real.graph.nodes)} if real is not None else {}
        self.real_map = {self.full_index[x]: real_index[y] for x, y in self.twins.items()}
        # node arguments that are block r of a split on rank r (DTensor's Replicate -> Shard:
        # the same ops, but each rank reads its own block): (node, path) -> RankValues
        self.rank_refs: dict[tuple[fx.Node, tuple], RankValues] = {}
        for c, nodes, _ in self.ranks:
            _check_same(full, nodes, f"rank {c}")
            for (x, path), idx in _check_refs(full, nodes, f"rank {c}").items():
                moved = [a for a in c if c[a] != self.coords.get(a, 0)]
                ax = moved[0]
                rv = self.rank_refs.get((x, path))
                vals = dict(rv.values) if rv is not None else {self.coords.get(ax, 0): idx[0]}
                if rv is not None and rv.axis != ax:
                    raise GraphMismatch(f"node {x.name} reads a block that depends on the "
                                        f"coordinates of several axes")
                vals[c[ax]] = idx[1]
                self.rank_refs[(x, path)] = RankValues(ax, vals, _affine(vals))
        for c, nodes, _ in self.corners:
            _check_same(full, nodes, f"rank {c}")
            self._check_corner_blocks(c, _check_refs(full, nodes, f"rank {c}"))
        # literal arguments that differ on some rank, (node index, key) -> (node, rank); each
        # must be read by a rule through scalar() / axis(), which checks it per rank: a rule that
        # reads n.args itself sees the main rank's only (a rank summing over another dim)
        self.rank_literals: dict[tuple[int, Any], tuple[fx.Node, dict[str, int]]] = {}
        for c, nodes, _ in self.ranks + self.corners:
            for fi, (x, y) in enumerate(zip(full, nodes)):
                for key in _literal_differences(x, y):
                    self.rank_literals.setdefault((fi, key), (x, c))
        self._read: set[tuple[int, Any]] = set()
        self.probe_sizes: dict[str, int] = {}
        self.real_sizes: dict[str, int] = {}
        self.axis_sizes: dict[str, int] = {}
        self._lift_cache: dict[tuple[Any, Any], Term | None] = {}

    def _check_corner_blocks(self, c: Mapping[str, int],
                             blocks: Mapping[tuple[fx.Node, tuple], tuple[int, int]]) -> None:
        """Corner ``c`` reads, at every split, the block its coordinate on that split's axis
        reads on the axis (and the main trace's block where no rank on the axes moves it).

        Raises:
            GraphMismatch: naming the node and the corner.
        """
        for key, (_, got) in blocks.items():
            if key not in self.rank_refs:
                raise GraphMismatch(f"node {key[0].name} reads another block on rank {c} than "
                                    "on every rank along one mesh axis: the program depends on "
                                    "the coordinates of several axes there")
        for key, rv in self.rank_refs.items():
            got = blocks[key][1] if key in blocks else rv.values.get(self.coords.get(rv.axis, 0))
            want = rv.values.get(c.get(rv.axis, 0))
            if want is None or got != want:
                raise GraphMismatch(f"node {key[0].name} reads block {got} on rank {c}, not "
                                    f"block {want} that coordinate {rv.axis}={c.get(rv.axis, 0)} "
                                    "reads on the mesh's axes")

    # -- groups -------------------------------------------------------------------------------
    def twin(self, n: fx.Node) -> fx.Node | None:
        """``n``'s node in the real-size trace (None for a move that has no twin there)."""
        return self.twins.get(n)

    def pg_axis(self, n: fx.Node, key: int) -> str:
        """The mesh axis of the c10d ``ProcessGroup`` argument ``key`` of ``n`` (a get_attr
        node holding a :class:`~spec_lang.torch_frontend.tracedata.ProcessGroupRef`), the same
        on every traced rank.

        Raises:
            ValueError: not a mesh axis, or the ranks disagree.
        """
        ref = n.args[key]
        name = getattr(getattr(self.main, ref.target, None), "group_name", None)
        if name not in self.groups:
            raise ValueError(f"process group {name!r} is not one of the mesh's axes")
        ax = self.groups[name]
        fi = self.full_index[n]
        for (c, nodes, groups), gm in zip(self.ranks + self.corners,
                                          self.rank_gms + self.corner_gms):
            oref = nodes[fi].args[key]
            oname = getattr(getattr(gm, oref.target, None), "group_name", None)
            if groups.get(oname) != ax:
                raise ValueError(f"the collective runs over {ax!r} on rank {self.coords} but over "
                                 f"{groups.get(oname)!r} on rank {c}")
        return ax

    def axis(self, n: fx.Node, key: Any) -> str:
        """The mesh axis of the process group in argument ``key`` of ``n``.

        Raises:
            ValueError: the group is not a mesh axis, or the ranks disagree on it.
        """
        g = _arg(n, key)
        self._read.add((self.full_index[n], key))
        if g not in self.groups:
            raise ValueError(f"process group {g!r} is not one of the mesh's axes "
                             f"{sorted(set(self.groups.values()))}")
        ax = self.groups[g]
        fi = self.full_index[n]
        for c, nodes, groups in self.ranks + self.corners:
            og = _arg(nodes[fi], key)
            if groups.get(og) != ax:
                raise ValueError(f"the collective runs over {ax!r} on rank {self.coords} but over "
                                 f"{groups.get(og)!r} on rank {c}")
        rn = self.twins.get(n)
        if self.real is not None and (rn is None or self.real_groups.get(_arg(rn, key)) != ax):
            raise ValueError("the collective's axis differs at real sizes")
        return ax

    # -- scalars ------------------------------------------------------------------------------
    def scalar(self, n: fx.Node, key: Any, v: Any) -> Any:
        """The meaning of python scalar ``v`` = argument ``key`` of ``n`` (module docstring).

        Raises:
            ValueError: a size literal no product of sizes explains, or a non-number.
        """
        rn = self.twins.get(n)
        fi = self.full_index[n]
        self._read.add((fi, key))
        # a literal's type sets a tensor's dtype (``torch.full(shape, 0)`` is int64, with 0.0
        # float): the same value of another type is another program (finding R14-1)
        others = [(f"on rank {c}", _arg(nodes[fi], key))
                  for c, nodes, _ in self.ranks + self.corners]
        if rn is not None:
            others.append(("at real sizes", _arg(rn, key)))
        for where, ov in others:
            if type(ov) is not type(v):
                raise ValueError(f"literal {v!r} of {n.name} is {ov!r} ({type(ov).__name__}) "
                                 f"{where}: its type, hence the tensor's dtype, differs")
        by_rank: dict[str, dict[int, Any]] = {}
        for c, nodes, _ in self.ranks:
            ov = _arg(nodes[fi], key)
            if ov != v:
                moved = [a for a in c if c[a] != self.coords.get(a, 0)]
                if len(moved) != 1:
                    raise ValueError(f"literal {v!r} differs on rank {c} in more than one axis")
                ax = moved[0]
                by_rank.setdefault(ax, {self.coords.get(ax, 0): v})[c[ax]] = ov
            else:
                for a in c:
                    if c[a] != self.coords.get(a, 0) and a in by_rank:
                        by_rank[a][c[a]] = ov
        if by_rank:
            if len(by_rank) != 1:
                raise ValueError(f"literal {v!r} depends on the coordinates of several axes "
                                 f"{sorted(by_rank)}")
            ax, vals = next(iter(by_rank.items()))
            for c, nodes, _ in self.ranks:   # fill the coordinates where it did not move
                if ax in c and c[ax] not in vals:
                    vals[c[ax]] = _arg(nodes[fi], key)
            self._check_corner_scalar(n, fi, key, v, ax, vals)
            real = _arg(rn, key) if rn is not None else None
            return RankValues(ax, vals, _affine(vals), real, self._real_values(fi, key, ax, real))
        self._check_corner_scalar(n, fi, key, v, None, {})
        if self.real is None:
            return exact_scalar(v)
        if rn is None:    # R24-1: a move of the probe trace only, whose data
            if n in self.loose_moves[0]:     # real_moves.check_real_moves compared by value
                return exact_scalar(v)
            raise ValueError(f"{n.name} has no counterpart in the trace at the real sizes, so "
                             f"its literal {v!r} cannot be checked there")
        rv = _arg(rn, key)
        if rv == v:
            return exact_scalar(v)
        t = self.lift(v, rv)
        if t is None:
            raise ValueError(f"literal {v!r} (at real sizes {rv!r}) depends on the sizes but is "
                             "no product of the model's dims and mesh axes")
        return t

    def _real_values(self, fi: int, key: Any, ax: str, real: Any) -> dict[int, Any] | None:
        """Argument ``key`` of full node ``fi`` at real sizes on every traced coordinate of
        ``ax`` (the main rank's ``real`` included); None when the other ranks were not traced
        at real sizes, ``{}`` when the node has no counterpart there."""
        if not self.real_ranks:
            return None
        if real is None or fi not in self.real_map:
            return {}           # traced, but unknown here: a rule reading it refuses
        out = {self.coords.get(ax, 0): real}
        for c, nodes in self.real_ranks:   # every rank, the corners too (round 32d, R32d-5)
            if ax not in c:
                return {}
            v = _arg(nodes[self.real_map[fi]], key)
            if out.setdefault(c[ax], v) != v:   # two ranks at one coordinate of ``ax`` differ
                return {}
        return out

    def read_same_on_ranks(self, n: fx.Node, key: Any) -> Any:
        """Argument ``key`` of ``n``, read by a rule that checks it at the real sizes itself
        (a flat bucket's split sizes, R35b-2): marked read; its value.

        Raises:
            ValueError: it differs on a traced rank.
        """
        fi = self.full_index[n]
        self._read.add((fi, key))
        v = _arg(n, key)
        for c, nodes, _ in self.ranks + self.corners:
            if _arg(nodes[fi], key) != v:
                raise ValueError(f"argument {key} of {n.name} is {_arg(nodes[fi], key)!r} on "
                                 f"rank {c} and {v!r} on rank {self.coords}")
        return v

    def was_read(self, n: fx.Node, key: Any) -> bool:
        """Whether a rule read argument ``key`` of ``n`` (or its whole list) through
        :meth:`scalar` / :meth:`axis`."""
        fi = self.full_index[n]
        return (fi, key) in self._read or (isinstance(key, tuple) and (fi, key[0]) in self._read)

    def unread_rank_literals(self) -> list[tuple[fx.Node, str]]:
        """The literal arguments that differ on some traced rank and that no rule read through
        :meth:`scalar` / :meth:`axis` (so the lowered program is the main rank's there): each
        the node and a sentence naming the argument and the rank; empty when there are none."""
        out = []
        for (fi, key), (x, c) in sorted(self.rank_literals.items(), key=lambda kv: kv[0][0]):
            if self.was_read(x, key):
                continue
            arg = key if not isinstance(key, tuple) else f"{key[0]}[{key[1]}]"
            out.append((x, f"argument {arg} of {x.name} ({x.target}) is "
                       f"{_arg(self._nodes_of(c)[fi], key)!r} on rank {c} and "
                       f"{_arg(x, key)!r} on rank {self.coords}, and no rule reads it per rank"))
        return out

    def constant_differs(self, n: fx.Node) -> str | None:
        """Why the captured constant of ``get_attr`` node ``n`` cannot be read as one exact
        value (it differs at real sizes or on another traced rank: ``torch.tensor(x.shape[0])``,
        ``torch.tensor(float(rank))``), or None."""
        mine = getattr(self.main, n.target, None)
        if held_text(mine) is not None:     # no values to compare (R46f-5)
            return held_text(mine)
        others = [(f"rank {c}", gm, g) for (c, _, g), gm in zip(self.ranks + self.corners,
                                                              self.rank_gms + self.corner_gms)]
        if self.real_gm is not None:
            others.append(("real sizes", self.real_gm, self.real_groups))
        for where, gm, groups in others:
            # a process group: each rank's own group of one mesh axis (R32d-4)
            same = same_constant(mine, getattr(gm, n.target, None), self.groups, groups)
            if not same:
                return constant_differs_text(mine, n.target, f"at {where}")
        return None

    def _nodes_of(self, c: Mapping[str, int]) -> list[fx.Node]:
        return next(nodes for rc, nodes, _ in self.ranks + self.corners if rc == c)

    def _check_corner_scalar(self, n: fx.Node, fi: int, key: Any, v: Any, ax: str | None,
                             vals: Mapping[int, Any]) -> None:
        """Every corner holds the literal its coordinate on ``ax`` gives (``v`` when the literal
        is the same on every rank along the axes).

        Raises:
            ValueError: a corner holds another value (the verdict cannot rest on the axes).
        """
        for c, nodes, _ in self.corners:
            ov = _arg(nodes[fi], key)
            want = v if ax is None else vals.get(c.get(ax, 0))
            if ov != want or type(ov) is not type(want):
                raise ValueError(f"literal {v!r} of {n.name} is {ov!r} on rank {c}, not {want!r} "
                                 "as the ranks along the mesh's axes give: the program depends on "
                                 "the coordinates of several axes")

    def _lift_root(self, probe: float, real: float) -> Term | None:
        """``|d|^e`` for ``e`` in +-1/2, +-1/4 (attention's scale, split over q and k as
        ``|E|^(-1/4)`` each), when it equals both floats to the last bits."""
        for k in sorted(self.probe_sizes):
            if k not in self.real_sizes:
                continue
            for e in (Fraction(-1, 2), Fraction(1, 2), Fraction(-1, 4), Fraction(1, 4)):
                if _close(self.probe_sizes[k] ** float(e), probe) and \
                        _close(self.real_sizes[k] ** float(e), real):
                    return ew(Op.POW, term(Op.DIM_SIZE, (), (k,), ()), attrs=(e,))
        return None

    def lift(self, probe: Any, real: Any) -> Term | None:
        """The product of dim and axis sizes equal to ``probe`` at probe sizes and ``real`` at
        real sizes (exponents -2..2, at most four factors: a mean over a local batch, a
        sequence and a hidden dim divides by ``|B| |S| |H| / |dp|``, finding R33-4), or None."""
        key = (probe, real)
        if key in self._lift_cache:
            return self._lift_cache[key]
        if isinstance(probe, float) and isinstance(real, float):
            t = self._lift_root(probe, real)
            if t is not None:
                self._lift_cache[key] = t
                return t
        try:
            p, r = Fraction(probe), Fraction(real)
        except (TypeError, ValueError):
            return None
        if p.denominator > 10**9 or r.denominator > 10**9:
            self._lift_cache[key] = None
            return None
        factors = [("dim", k, self.probe_sizes[k], self.real_sizes[k])
                   for k in sorted(self.probe_sizes) if k in self.real_sizes]
        factors += [("axis", a, s, s) for a, s in sorted(self.axis_sizes.items())]
        found = None
        for size in range(1, 5):
            for combo in itertools.combinations_with_replacement(range(len(factors)), size):
                for signs in itertools.product((1, -1), repeat=size):
                    pv = rv = Fraction(1)
                    for idx, s in zip(combo, signs):
                        f = factors[idx]
                        pv *= Fraction(f[2]) ** s
                        rv *= Fraction(f[3]) ** s
                    if pv == p and rv == r:
                        found = [(factors[idx], s) for idx, s in zip(combo, signs)]
                        break
                if found:
                    break
            if found:
                break
        t = None
        if found:
            parts = []
            for (kind, name, _, _), s in found:
                base = term(Op.DIM_SIZE if kind == "dim" else Op.AXIS_SIZE, (), (name,), ())
                parts.append(base if s == 1 else ew(Op.POW, base, attrs=(Fraction(s),)))
            t = parts[0] if len(parts) == 1 else ew(Op.MUL, *parts)
        self._lift_cache[key] = t
        return t


def _literal_differences(x: fx.Node, y: fx.Node) -> list[Any]:
    """The argument keys of two aligned nodes whose literals differ: an index into ``args`` or
    a kwarg name, ``(key, j)`` for item ``j`` of a list of the same length."""
    out: list[Any] = []
    pairs = [(k, a, b) for k, (a, b) in enumerate(zip(x.args, y.args))]
    pairs += [(k, x.kwargs.get(k), y.kwargs.get(k)) for k in sorted(set(x.kwargs) | set(y.kwargs))]
    for k, a, b in pairs:
        if _skeleton(a) == _skeleton(b):
            continue
        if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b) \
                and type(a) is type(b):
            out += [(k, j) for j, (u, v) in enumerate(zip(a, b)) if _skeleton(u) != _skeleton(v)]
        else:
            out.append(k)
    if len(x.args) != len(y.args):
        out.append(min(len(x.args), len(y.args)))
    return out


def _moved(c: Mapping[str, int], base: Mapping[str, int]) -> list[str]:
    """The axes on which coordinate ``c`` differs from ``base``."""
    return [a for a in c if c[a] != base.get(a, 0)]


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 4e-16 * max(abs(a), abs(b))


def _affine(vals: Mapping[int, Any]) -> tuple[Fraction, Fraction] | None:
    try:
        pts = sorted((int(c), Fraction(v)) for c, v in vals.items())
    except (TypeError, ValueError):
        return None
    if len(pts) < 2:
        return None
    (c0, v0), (c1, v1) = pts[0], pts[1]
    k = (v1 - v0) / (c1 - c0)
    b = v0 - k * c0
    if all(v == b + k * c for c, v in pts):
        return b, k
    return None


def _refs(x: Any, path: tuple = ()) -> list[tuple[tuple, fx.Node]]:
    if isinstance(x, fx.Node):
        return [(path, x)]
    if isinstance(x, (list, tuple)):
        out = []
        for i, y in enumerate(x):
            out += _refs(y, path + (i,))
        return out
    if isinstance(x, dict):
        out = []
        for k in sorted(x):
            out += _refs(x[k], path + (k,))
        return out
    return []


def _sources(n: fx.Node, index: dict[fx.Node, int]) -> frozenset[int]:
    """The computing nodes (their indices) ``n`` moves data from (itself if it computes)."""
    if n in index:
        return frozenset((index[n],))
    out: set[int] = set()
    for _, m in _refs((n.args, n.kwargs)):
        out |= _sources(m, index)
    return frozenset(out)


def _check_refs(a: list[fx.Node], b: list[fx.Node], what: str, *, resolve: bool = False
                ) -> dict[tuple[fx.Node, tuple], tuple[int, int]]:
    """The two aligned graphs read the same (aligned) nodes. Returns the arguments that read
    block ``i`` of one split in ``a`` and block ``j != i`` of it in ``b`` ((node, path) ->
    (i, j)); any other difference in the dataflow raises.

    Raises:
        GraphMismatch: naming the node.
    """
    ia = {n: i for i, n in enumerate(a)}
    ib = {n: i for i, n in enumerate(b)}
    blocks: dict[tuple[fx.Node, tuple], tuple[int, int]] = {}
    for x, y in zip(a, b):
        ra = _refs((x.args, x.kwargs))
        rb = _refs((y.args, y.kwargs))
        if [p for p, _ in ra] != [p for p, _ in rb]:
            raise GraphMismatch(f"node {x.name} has different arguments at {what}")
        for (path, u), (_, v) in zip(ra, rb):
            if resolve:   # aligned on computing nodes: compare what the data comes from
                if _sources(u, ia) == _sources(v, ib):
                    continue
                raise GraphMismatch(f"the program's dataflow differs at {what}: node {x.name} "
                                    f"({x.target}) reads other values there")
            if ia.get(u) == ib.get(v):
                continue
            if (u.target is operator.getitem and v.target is operator.getitem
                    and ia.get(u.args[0]) is not None and ia.get(u.args[0]) == ib.get(v.args[0])
                    and str(u.args[0].target) == "aten.split.Tensor"):
                blocks[(x, path)] = (u.args[1], v.args[1])
                continue
            raise GraphMismatch(f"the program's dataflow differs at {what}: node {x.name} "
                                f"({x.target}) reads {u.name} on the main trace and {v.name} "
                                "there")
    return blocks


def _check_same(a: list[fx.Node], b: list[fx.Node], what: str, path: str | None = None) -> None:
    """``b`` (the trace at ``what``) runs the ops of ``a`` (the main trace) node by node.

    Raises:
        GraphMismatch: naming the first op that differs (or the first extra one) and the
            user's ``file:line`` of it (``analysis.node_site``; ``path``: the train file).
    """
    why = "the program's ops depend on the sizes or the rank"
    if what == "real sizes":    # DTensor picks a redistribution by the sizes (stop 54's user)
        why += (" (one cause: DTensor picks its redistribution by the sizes when a module gets "
                "a DTensor in another layout than its style's input_layouts declare; make them "
                "match)")
    for x, y in zip(a, b):
        if x.op != y.op or x.target != y.target:
            raise GraphMismatch(f"the trace at {what} runs {y.target} ({node_site(y, path)}) where "
                                f"the main trace runs {x.target} ({node_site(x, path)}): {why}",
                                site=_user_site(x, path))
    if len(a) != len(b):
        extra = (b if len(b) > len(a) else a)[min(len(a), len(b))]
        raise GraphMismatch(f"the graph at {what} has {len(b)} nodes, the main trace {len(a)} "
                            f"(the first extra: {extra.target}, {node_site(extra, path)}): {why}",
                            site=_user_site(extra, path))


def _user_site(n: fx.Node, path: str | None) -> str | None:
    """``analysis.node_site`` when the node has a user frame, else None."""
    site = node_site(n, path)
    return None if site.startswith("<") else site
