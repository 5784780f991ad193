"""Placements in DTensor's vocabulary and the lineage they define.

A placement says, per mesh axis, how a rank's local tensor relates to the spec's full tensor:

* ``Shard(d)``: the rank holds block ``r`` of ``|axis|`` equal blocks along dim ``d``
  (``SHARD(x, d, axis)``); several axes sharding one dim nest in mesh order.
* ``Replicate()``: the rank holds ``x``.
* ``Partial("sum")``: the rank holds an addend; the addends over the axis sum to ``x``
  (``PART(x, axis)``). ``Partial("avg")``: their *mean* is ``x``; the addend is written
  ``|axis| * PART(x, axis)``.

An axis missing from a placement map is ``Replicate()``. ``Shard`` takes a dim (``Dim`` or
name), never an index (STYLE rule 7).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from spec_lang.dims import Dim, DimLike
from spec_lang.errors import PlanError
from spec_lang.mesh import Mesh
from spec_lang.term import DimSpec, Op, Term, term

__all__ = ["Placement", "Shard", "StridedShard", "Replicate", "Partial", "PlacementMap", "lineage",
           "expected_through", "describe_placements", "placement_errors"]


@dataclass(frozen=True, slots=True)
class Shard:
    """Block ``r`` of ``|axis|`` equal blocks along ``dim``."""

    dim: str

    def __init__(self, dim: DimLike):
        if isinstance(dim, int):
            raise PlanError(f"Shard({dim}): name the dim (Shard(F) or Shard('F')), not an index")
        object.__setattr__(self, "dim", dim.name if isinstance(dim, Dim) else str(dim))

    def __str__(self) -> str:
        return f"Shard({self.dim})"


class StridedShard(Shard):
    """An interleaved shard (PyTorch's ``_StridedShard``, FSDP2 over TP): on this axis the rank
    holds block ``r`` of the blocks left *after* the later mesh axes shard ``dim``, so the
    nesting order over ``dim`` is reversed. On ``Mesh(dp=2, tp=2)`` with ``{dp:
    StridedShard(K), tp: Shard(K)}`` rank ``(i, j)`` holds block ``i + 2j`` of ``K``
    (``SHARD(SHARD(x, K, tp), K, dp)``, type ``K[tp,dp]``), where ``{dp: Shard(K), tp:
    Shard(K)}`` holds block ``2i + j`` (type ``K[dp,tp]``). Source: PyTorch #166598.

    ``split_factor`` (optional, as in PyTorch): the product of the sizes of the later axes that
    shard ``dim``; checked against the mesh.
    """

    __slots__ = ("split_factor",)

    def __init__(self, dim: DimLike, split_factor: int | None = None):
        Shard.__init__(self, dim)
        object.__setattr__(self, "split_factor", split_factor)

    def __eq__(self, other: object) -> bool:
        return type(other) is StridedShard and (self.dim, self.split_factor) == (
            other.dim, other.split_factor)

    def __hash__(self) -> int:
        return hash(("StridedShard", self.dim, self.split_factor))

    def __str__(self) -> str:
        sf = f", split_factor={self.split_factor}" if self.split_factor is not None else ""
        return f"StridedShard({self.dim}{sf})"


@dataclass(frozen=True, slots=True)
class Replicate:
    """Every rank holds the full value."""

    def __str__(self) -> str:
        return "Replicate()"


@dataclass(frozen=True, slots=True)
class Partial:
    """Each rank holds an addend; ``op="sum"``: they sum to the value, ``"avg"``: they average to it."""

    op: str = "sum"

    def __post_init__(self) -> None:
        if self.op not in ("sum", "avg"):
            raise PlanError(f'Partial({self.op!r}): use Partial("sum") or Partial("avg")')

    def __str__(self) -> str:
        return f'Partial("{self.op}")'


Placement = Shard | StridedShard | Replicate | Partial
PlacementMap = Mapping[str, Placement]


def describe_placements(pl: PlacementMap, mesh: Mesh | Mapping[str, int]) -> str:
    """``"dp: Replicate(), tp: Shard(F)"`` over every axis in mesh order."""
    return ", ".join(f"{a}: {pl.get(a, Replicate())}" for a in mesh)


def placement_errors(name: str, dims: Mapping[str, int], pl: PlacementMap,
                     mesh: Mapping[str, int], site: str) -> list[str]:
    """Every problem with placing tensor ``name`` (dims -> sizes) by ``pl`` on ``mesh``."""
    errs: list[str] = []
    shape = "(" + ", ".join(f"{d}={n}" for d, n in dims.items()) + ")"
    for a, p in pl.items():
        if str(a) not in mesh:
            errs.append(f"{site}: {name} {shape} has a placement on axis {str(a)!r}, which is not in "
                        f"the mesh {dict(mesh)}; remove it or add the axis to the mesh")
        if not isinstance(p, Shard | Replicate | Partial):
            errs.append(f"{site}: {name}: placement {p!r} on axis {str(a)!r} is not "
                        "Shard(dim)/Replicate()/Partial(op)")
    local = dict(dims)
    for a in mesh:
        p = pl.get(a, Replicate())
        if isinstance(p, Shard):
            if p.dim not in dims:
                errs.append(f"{site}: {name} {shape} is Shard({p.dim}) on axis {a!r} but has no dim "
                            f"{p.dim}; shard one of {list(dims)}")
                continue
            n, k = local[p.dim], mesh[a]
            if n % k:
                errs.append(f"{site}: {name} {shape} puts dim {p.dim} (size {dims[p.dim]}, "
                            f"{n} per rank before {a!r}) on axis {a!r} (size {k}); {k} does not "
                            f"divide {n}. Pad {p.dim} or shrink {a!r}.")
                continue
            local[p.dim] = n // k
            if isinstance(p, StridedShard) and p.split_factor is not None:
                later = [b for b in list(mesh)[list(mesh).index(a) + 1:]
                         if type(pl.get(b)) is Shard and pl[b].dim == p.dim]
                want = 1
                for b in later:
                    want *= mesh[b]
                if p.split_factor != want:
                    errs.append(f"{site}: {name}: {p} on axis {a!r}: split_factor must be the "
                                f"product of the later axes sharding {p.dim} ({later}: {want})")
    return errs


def lineage(x: Term, pl: PlacementMap, mesh: Mesh | Mapping[str, int]) -> Term:
    """A rank's local view of spec tensor ``x`` under placement ``pl`` (axes in mesh order).

    ``Shard(d)`` -> ``SHARD(x, d, axis)``; ``Replicate`` -> ``x``; ``Partial("sum")`` ->
    ``PART(x, axis)``; ``Partial("avg")`` -> ``MUL(AXIS_SIZE(axis), PART(x, axis))``.
    """
    strided = [a for a in mesh if isinstance(pl.get(a), StridedShard)]
    order = [(a, False) for a in mesh] + [(a, True) for a in strided]
    for a, late in order:  # a strided shard nests inside the later axes' shards of its dim
        p = pl.get(a, Replicate())
        if isinstance(p, StridedShard) != late:
            continue
        match p:
            case Shard(dim=d):
                dims = tuple(DimSpec(s.name, s.shards + (a,)) if s.name == d else s for s in x.dims)
                x = term(Op.SHARD, (x,), (d, a), dims)
            case Replicate():
                pass
            case Partial(op="sum"):
                x = term(Op.PART, (x,), (a,), x.dims)
            case Partial():
                part = term(Op.PART, (x,), (a,), x.dims)
                x = term(Op.MUL, (term(Op.AXIS_SIZE, (), (a,), ()), part), (), x.dims)
            case _:
                raise PlanError(f"unknown placement {p!r}")
    return x


def expected_through(x: Term, pl: PlacementMap, mesh: Mesh | Mapping[str, int]) -> Term:
    """What a rank must hold of spec output ``x`` under output placement ``pl``.

    Raises:
        PlanError: a ``Partial`` output placement (its addends are unspecified: compare the
            reduced value instead).
    """
    for a in mesh:
        if isinstance(pl.get(a, Replicate()), Partial):
            raise PlanError(f"output placement Partial on axis {a!r} cannot be checked; reduce first")
    return lineage(x, pl, mesh)
