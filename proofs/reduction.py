"""Shape reduction for the refuter's search: small dim sizes that keep what the program can see.

Reduced sizes are a *search* device: a divergence found at them is reported only once confirmed
(:mod:`proofs.confirm`), and a z3 query runs at the sizes :mod:`proofs.admissible` allows
(``docs/soundness.md``). Mesh axis sizes (and the micro-batch count ``mb``) keep their real
values. Dims shrink by *size class* (dims linked by a ``RENAME`` keep their ratio: a RoPE half
``HD_half`` stays half of ``HD``): a class whose block sizes at the real sizes have gcd ``U`` (its
*unit*: every shard, chunk and PERMUTE block is a multiple of it) is cut to ``m`` elements per unit,
so every member ``d`` becomes ``size(d) / U * m`` and every block structure is kept:

* a class never cut by a shard or chunk gets ``m = base`` (3 by default: odd, so that an
  unintended split shows); a sharded one 2 elements per unit while the largest member stays
  under ``cheap`` elements, else 1;
* a dim a ``TOPK_MASK`` selects along keeps at least ``k + 2`` elements (:func:`min_sizes`), and
  every block a ``REDUCE_MAX`` reduces at least 3: enough for every case the op distinguishes
  (``k - 1`` and ``k + 1`` selected; a block of 2 where ``sum - max - min`` is 0);
* *size-dependent* dims (read by ``DIM_SIZE``, ``CAUSAL_MASK``, ``ROPE_*``, ``ONE_HOT``,
  ``TOPK_MASK``, ``SHIFT``, or the range of an index input) that play a common role (share a
  kind of :func:`proofs.admissible.size_kinds`) keep their equality relations (two causal masks
  over dims of different sizes stay different; two RoPE half dims), and, for index-like dims
  (positions compared with values), their order (``V2 < V`` stays ``V2 < V``) and their
  divisibility when that costs at most twice the elements; dims of equal real size among them
  scale together (the relations Rule L of ``docs/soundness.md`` requires of a confirmation);
* a dim never grows past its real size.

:func:`reduce_mesh` goes further for the refuter only: it also shrinks the mesh axes (and ``mb``)
on which the program is generic, so that refutation costs the same at dp 1024 as at dp 4. It
is a search heuristic, never a proof: every mismatch it finds is confirmed at the real mesh
sizes before the prover reports it (``docs/rank-symmetry.md``).
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from proofs.admissible import ORDERED_KINDS, related_alike, size_kinds
from spec_lang.term import Binding, Op, Term, term, varying_axes, walk

__all__ = ["MESH_AXES", "reduce_binding", "min_sizes", "MeshReduction", "reduce_mesh",
           "eval_cost", "AXIS_LEAST", "AXIS_MAX_REPS"]

MESH_AXES = ("dp", "tp", "pp", "cp", "sp", "ep", "mb", "dp_replicate", "dp_shard")
MAX_LEAST = 3   # elements in every block a REDUCE_MAX reduces


def _axis_size(binding: Mapping[str, int], a: str) -> int:
    return int(a.split("/")[1]) if a.startswith("#") else binding[a]


def min_sizes(roots: Iterable[Term]) -> dict[str, int]:
    """Dim name -> least reduced size: ``k + 2`` for a dim a ``TOPK_MASK(x, dim, k)`` selects
    along (the largest ``k`` over every such mask)."""
    need: dict[str, int] = {}
    for t in walk(list(roots)):
        if t.op is Op.TOPK_MASK:
            d, k = str(t.attrs[0]), int(t.attrs[1])
            need[d] = max(need.get(d, 0), k + 2)
    return need


@dataclass
class _Group:
    """Dims that shrink by one factor: ``size(d) / unit * m`` for every member ``d``."""

    dims: list[str]
    unit: int
    least: int = 1          # least m
    kinds: frozenset[str] = frozenset()   # size_kinds of the members (empty: not dependent)

    @property
    def dependent(self) -> bool:
        return bool(self.kinds)


def _groups(roots: list[Term], binding: Binding) -> list[_Group]:
    parent: dict[str, str] = {}

    def find(n: str) -> str:
        parent.setdefault(n, n)
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    blocks: dict[str, int] = defaultdict(int)
    kinds: dict[str, set[str]] = defaultdict(set)
    least_el: dict[str, int] = {}   # elements in the whole dim (min_sizes, in this one walk)
    max_blocks: dict[str, int] = {}     # dim -> largest shard product of a block a max reduces
    seen_dims: set[tuple] = set()    # a dims tuple adds the same blocks each time it recurs
    for t in walk(roots):
        if t.dims not in seen_dims:
            seen_dims.add(t.dims)
            for d in t.dims:
                if d.name in binding:
                    find(d.name)
                    p = math.prod(_axis_size(binding, a) for a in d.shards)
                    blocks[d.name] = math.gcd(blocks[d.name], binding[d.name] // p)
        match t.op:
            case Op.RENAME if t.attrs[0] != t.attrs[1]:
                parent[find(t.attrs[0])] = find(t.attrs[1])
            case Op.PERMUTE:   # the block order needs len(order) equal blocks of the local dim
                d = t.dim(t.attrs[0])
                p = math.prod(_axis_size(binding, a) for a in d.shards) * len(t.attrs[1])
                blocks[d.name] = math.gcd(blocks[d.name], binding[d.name] // p)
            case Op.REDUCE_MAX:
                for d in t.attrs[0]:
                    p = math.prod(_axis_size(binding, a) for a in t.args[0].dim(d).shards)
                    max_blocks[d] = max(max_blocks.get(d, 1), p)
            case Op.TOPK_MASK:   # min_sizes: k + 2 elements along the dim a top-k selects
                d, k = str(t.attrs[0]), int(t.attrs[1])
                least_el[d] = max(least_el.get(d, 0), k + 2)
            case _:
                pass
        for d, kind in size_kinds(t.op.name, t.attrs):
            kinds[d].add(kind)
    names = [n for n in binding if n not in MESH_AXES and (n in blocks or n in kinds)]
    for n in names:
        find(n)
    members: dict[str, list[str]] = defaultdict(list)
    for n in names:
        members[find(n)].append(n)
    out: list[_Group] = []
    for ms in members.values():
        unit = math.gcd(*(blocks[n] or binding[n] for n in ms))
        least = 1
        for n in ms:
            if n in least_el:
                least = max(least, -(-least_el[n] * unit // binding[n]))
            if n in max_blocks:    # MAX_LEAST elements in every block a max reduces
                least = max(least, -(-MAX_LEAST * max_blocks[n] * unit // binding[n]))
        out.append(_Group(sorted(ms), unit, least,
                          frozenset().union(*(kinds.get(n, set()) for n in ms))))
    # size-dependent classes of equal real sizes shrink together (their equality is kept)
    dep = [g for g in out if g.dependent]
    merged: list[_Group] = [g for g in out if not g.dependent]
    while dep:
        g = dep.pop()
        sizes = {binding[n] for n in g.dims}
        same = [h for h in dep if sizes & {binding[n] for n in h.dims}]
        for h in same:
            dep.remove(h)
            g = _Group(sorted(g.dims + h.dims), math.gcd(g.unit, h.unit),
                       max(g.least, h.least), g.kinds | h.kinds)
        if same:
            dep.append(g)
        else:
            merged.append(g)
    return merged


def reduce_binding(roots: Iterable[Term], binding: Binding, *, base: int = 3,
                   cheap: int = 1024) -> Binding:
    """A binding with the same mesh axes and reduced dims (see the module docstring)."""
    roots = list(roots)
    sizes = dict(binding)
    done: list[tuple[int, int, frozenset[str]]] = []   # size-dependent dims placed so far

    def m0(g: _Group) -> int:
        if g.unit == math.gcd(*(binding[n] for n in g.dims)):   # never cut by a shard or chunk
            m = base
        else:
            m = 2 if max(binding[n] // g.unit for n in g.dims) * 2 <= cheap else 1
        return min(g.unit, max(m, g.least))

    groups = _groups(roots, binding)
    for g in sorted(groups, key=lambda g: (min(binding[n] for n in g.dims), g.dims)):
        m = m0(g)
        if g.dependent:
            m = _related(g, binding, m, done)
            done += [(binding[n], binding[n] // g.unit * m, g.kinds) for n in g.dims]
        for n in g.dims:
            sizes[n] = binding[n] // g.unit * m
    return Binding(sizes)


def _related(g: _Group, binding: Binding, m: int, done: list[tuple[int, int, frozenset[str]]]
             ) -> int:
    """The least ``m' >= m`` at which every member keeps, with the size-dependent dims placed so
    far, the relations :func:`proofs.admissible.related_alike` requires (divisibility too where
    they share an ordered kind, within twice that); ``g.unit`` (the real sizes) when none does."""
    lo, hi = m, g.unit
    for n in g.dims:
        r, q = binding[n], binding[n] // g.unit
        for ra, sa, ka in done:
            if not ka & g.kinds & ORDERED_KINDS:
                continue
            if ra < r:
                lo = max(lo, sa // q + 1)
            elif ra > r:
                hi = min(hi, -(-sa // q) - 1)

    def alike(m2: int) -> bool:
        return all(related_alike(g.kinds, ka, binding[n], ra, binding[n] // g.unit * m2, sa)
                   for n in g.dims for ra, sa, ka in done)

    def divides_alike(m2: int) -> bool:
        return all((binding[n] % ra == 0) == ((binding[n] // g.unit * m2) % sa == 0) and
                   (ra % binding[n] == 0) == (sa % (binding[n] // g.unit * m2) == 0)
                   for n in g.dims for ra, sa, ka in done if ka & g.kinds & ORDERED_KINDS)

    first = next((m2 for m2 in range(lo, hi + 1) if alike(m2)), None)
    if first is None:
        return g.unit
    return next((m2 for m2 in range(first, min(hi, 2 * first) + 1)
                 if alike(m2) and divides_alike(m2)), first)


# ---------------------------------------------------------------------------------------------
# Mesh reduction for the refuter (docs/rank-symmetry.md)

AXIS_LEAST = 3      # a reduced axis keeps at least this many coordinates (a ring needs 3: with
#                     2 coordinates "next" and "previous" are the same rank)
AXIS_MAX_REPS = 8   # most coordinates kept for an axis with per-rank values; above: real size


@dataclass
class MeshReduction:
    """The goals' terms as the same program on a smaller mesh, for the refuter.

    Attributes:
        roots: the input roots rewritten for the reduced mesh, in the same order (a root that
            needs no change is the same term).
        binding: reduced mesh axes, and dims reduced for them (:func:`reduce_binding`).
        mesh: axis -> reduced size, every mesh axis of the binding.
        reps: reduced axis -> the real coordinate each reduced coordinate stands for.
        kept: axis -> why it keeps its real size (only axes larger than :data:`AXIS_LEAST`).
        constants: real constant -> its value on the reduced mesh (``1/64`` -> ``1/4`` for an
            average over dp 64 written as a literal).
    """

    roots: list[Term]
    binding: Binding
    mesh: dict[str, int]
    reps: dict[str, tuple[int, ...]] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)
    constants: dict[Any, Any] = field(default_factory=dict)
    size_table: dict[Fraction, Fraction] = field(default_factory=dict)

    @property
    def reduced(self) -> bool:
        return bool(self.reps)

    def real_constant(self, x: Any) -> Fraction | None:
        """The real-mesh constant a reduced-mesh constant stands for, when exactly one product
        of axis sizes (or its inverse) maps to it (``1/4`` -> ``1/64`` for dp 64 -> 4); ``x``
        itself when no size maps to it; ``None`` when ambiguous. A search aid (e.g. a factor
        seen on the reduced mesh), never evidence: confirm at the real sizes."""
        v = _exact(x)
        if v is None:
            return None
        pre = {r for r, q in self.size_table.items() if q == v}
        if not pre:
            return v
        return pre.pop() if len(pre) == 1 else None

    def real_rank(self, rank: Mapping[str, int]) -> dict[str, int]:
        """Reduced rank coordinates -> the real coordinates they stand for."""
        return {a: self.reps[a][r] if a in self.reps else r for a, r in rank.items()}

    def describe(self) -> str:
        return ", ".join(f"{a}={n}" for a, n in self.mesh.items() if a in self.reps)


def _divisor_at_least(n: int, k: int) -> int:
    """The least divisor of ``n`` that is ``>= k`` (``n`` itself when none is smaller)."""
    for d in range(max(1, k), n + 1):
        if n % d == 0:
            return d
    return n


def _exact(v: Any) -> Fraction | None:
    if isinstance(v, Fraction):
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        return Fraction(v)
    try:
        import sympy  # noqa: PLC0415

        x = sympy.nsimplify(v)
        if isinstance(x, sympy.Rational):
            return Fraction(int(x.p), int(x.q))
    except (TypeError, ValueError, AttributeError, ImportError):
        pass
    return None


def _size_constants(real: Mapping[str, int], small: Mapping[str, int]) -> dict[Fraction, Fraction]:
    """Real constant -> reduced constant for ``n``, ``1/n`` of every product of up to three
    distinct axes whose size changes; a value two products map to different images is left
    alone (ambiguous)."""
    axes = [a for a, n in real.items() if n > 1]
    image: dict[Fraction, set[Fraction]] = defaultdict(set)
    for r in (1, 2, 3):
        for sub in itertools.combinations(axes, r):
            p = math.prod(real[a] for a in sub)
            q = math.prod(small[a] for a in sub)
            image[Fraction(p)].add(Fraction(q))
            image[Fraction(1, p)].add(Fraction(1, q))
    return {v: next(iter(im)) for v, im in image.items() if len(im) == 1 and next(iter(im)) != v}


def reduce_mesh(roots: Iterable[Term], binding: Binding, *, least: int = AXIS_LEAST,
                max_reps: int = AXIS_MAX_REPS, keep: Iterable[str] = (),
                at_least: Mapping[str, int] | None = None) -> MeshReduction:
    """The program of ``roots`` on a mesh whose axes are cut to a few coordinates.

    An axis of real size ``n > least`` is cut to ``k``, the least divisor of ``n`` that is at
    least ``least`` and at least the number of coordinates it must keep (so every divisibility
    the real sizes satisfy still holds). It must keep:

    * for each distinct tuple of per-rank values of the ``RANK_CONST`` s over it (a different
      epsilon on dp rank 63), the first coordinate that has it; the reduced ``RANK_CONST``
      holds the values of the kept coordinates (``ops.rank``'s ``0..n-1`` becomes ``0..k-1``;
      a constant list stays constant);
    * every ``BROADCAST`` source coordinate (renumbered).

    An axis keeps its real size when it needs more than ``max_reps`` coordinates, or when it
    shards a dim that a ``PERMUTE`` reorders (a block order, e.g. context parallelism's
    load-balancing order, is data tied to the real size). Constants equal to ``n`` or ``1/n``
    for a product ``n`` of up to three changed axis sizes are replaced by the reduced product
    (a plan may write ``1/64`` for ``1/|dp|``); a constant that means something else is then
    wrong at the reduced sizes, which costs a confirmation at the real sizes, never a verdict.

    ``keep`` names axes the caller needs at their real size; ``at_least`` raises the least
    reduced size of some axes (to see how a value scales with one axis).

    Returns:
        a :class:`MeshReduction` (``reduced`` False when no axis could be cut).
    """
    roots = list(roots)
    nodes = walk(roots)
    mesh_real = {a: int(binding[a]) for a in binding if a in MESH_AXES}
    cand = [a for a, n in mesh_real.items() if n > least]
    if not cand:
        return MeshReduction(roots, binding, dict(mesh_real))
    kept: dict[str, str] = {a: "kept by the caller" for a in keep if a in cand}
    cols: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    srcs: dict[str, set[int]] = defaultdict(set)
    permuted: set[str] = set()
    for t in nodes:
        if t.op is Op.RANK_CONST:
            a, vals = t.attrs[0], tuple(t.attrs[1])
            if a in mesh_real and len(set(vals)) > 1 and \
                    [_exact(v) for v in vals] != [Fraction(i) for i in range(len(vals))]:
                cols[a].append(vals)
        elif t.op is Op.BROADCAST:
            srcs[t.attrs[0]].add(int(t.attrs[1]))
        elif t.op is Op.PERMUTE:
            permuted.add(str(t.attrs[0]))
    if permuted:
        for t in nodes:
            for d in t.dims:
                if d.name in permuted:
                    for a in d.shards:
                        if a in cand and a not in kept:
                            kept[a] = (f"it shards {d.name}, which a PERMUTE reorders (a block "
                                       f"order tied to the real size)")
    reps: dict[str, tuple[int, ...]] = {}
    for a in cand:
        if a in kept:
            continue
        n = mesh_real[a]
        first: dict[tuple[Any, ...], int] = {}
        for r in range(n):
            first.setdefault(tuple(v[r] for v in cols[a]), r)
        need = set(first.values()) | srcs[a]
        if len(need) > max_reps:
            kept[a] = (f"{len(first)} distinct per-rank values (RANK_CONST) need more than "
                       f"{max_reps} coordinates")
            continue
        k = _divisor_at_least(n, max(least, len(need), (at_least or {}).get(a, 0)))
        if k >= n:
            continue
        pad = (r for r in range(n) if r not in need)
        while len(need) < k:
            need.add(next(pad))
        reps[a] = tuple(sorted(need))
    small = {a: len(reps[a]) if a in reps else n for a, n in mesh_real.items()}
    if not reps:
        return MeshReduction(roots, binding, dict(mesh_real), kept=kept)
    consts = _size_constants(mesh_real, small)

    def gen(v: Any) -> Any:
        x = _exact(v)
        return consts.get(x, v) if x is not None else v

    used: dict[Any, Any] = {}
    new: dict[int, Term] = {}
    for t in nodes:
        args = tuple(new[id(c)] for c in t.args)
        attrs = t.attrs
        if t.op is Op.CONST:
            v = gen(t.attrs[0])
            if v is not t.attrs[0]:
                used[t.attrs[0]] = v
                attrs = (v,) + tuple(t.attrs[1:])
        elif t.op is Op.RANK_CONST and t.attrs[0] in reps:
            a, vals = t.attrs[0], tuple(t.attrs[1])
            rp = reps[a]
            if [_exact(v) for v in vals] == [Fraction(i) for i in range(len(vals))] \
                    and len(vals) > 1:
                out = tuple(Fraction(i) for i in range(len(rp)))   # ops.rank: the coordinate
            else:
                out = tuple(gen(vals[r]) for r in rp)
            attrs = (a, out) + tuple(t.attrs[2:])
        elif t.op is Op.BROADCAST and t.attrs[0] in reps:
            attrs = (t.attrs[0], reps[t.attrs[0]].index(int(t.attrs[1]))) + tuple(t.attrs[2:])
        if attrs == t.attrs and all(x is y for x, y in zip(args, t.args)):
            new[id(t)] = t
        else:
            new[id(t)] = term(t.op, args, attrs, t.dims)
    out_roots = [new[id(r)] for r in roots]
    b = reduce_binding(out_roots, binding.replace(**{a: small[a] for a in reps}))
    return MeshReduction(out_roots, b, small, reps=reps, kept=kept, constants=used,
                         size_table=consts)


def eval_cost(roots: Iterable[Term], binding: Binding) -> int:
    """Float64 elements the evaluator computes for ``roots`` at ``binding``: over every distinct
    node, its local elements times the sizes of the mesh axes it varies over (an upper bound on
    the work, and on the memory when every value is kept)."""
    total = 0
    for t in walk(list(roots)):
        n = 1
        for d in t.dims:
            try:
                n *= max(1, binding.local_size(d))
            except (KeyError, ValueError, Exception):  # noqa: BLE001 -- unsized: count as 1
                pass
        for a in varying_axes(t):
            n *= int(binding[a]) if a in binding else 1
        total += n
    return total
