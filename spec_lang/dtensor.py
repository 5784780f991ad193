"""DTensor-style layout helpers: ``to_local`` and ``redistribute`` with explicit index maps.

A local tensor's type says which global block the rank holds: ``K[dp,tp]`` (shards outermost
first) is block ``r_dp * |tp| + r_tp`` of ``K``; a strided shard (``StridedShard``, PyTorch's
``_StridedShard``) gives the reversed nesting ``K[tp,dp]``: block ``r_dp + |dp| * r_tp``. The
library's contraction (``ops.einsum``) only contracts operands whose types agree on the
contracted dim, so ``K_r^A = K_r^B`` on every rank (the side condition of CASES.md B31). These
helpers are what a user writes around it:

* :func:`to_local` is ``DTensor.to_local()``: the same local data with the placement
  *forgotten*: typed as the plain mesh-order nesting, whatever index map the data really has.
  A later local contraction then pairs blocks by rank, not by global index (B31's bug). Its
  term states the truth through the global tensor: ``SHARD``s in mesh order of
  ``PERMUTE(gathered, d, order)`` where ``order`` maps each rank's plain block index to the block
  it really holds (no communication happens; the term only names the data).
* :func:`redistribute` is ``DTensor.redistribute(placements)``: gather every sharded dim, then
  shard by the new placements (all-gathers, then local slices).

Both are forward-only: a gather or slice of a computed value on a differentiated path is a
PlanError (use regions there).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping

from spec_lang.placement import Placement, Replicate, lineage, placement_errors
from spec_lang.tensor import Tensor, current_trace, fail, user_site
from spec_lang.term import DimSpec, Op, Term, term, varying_axes

__all__ = ["to_local", "redistribute", "block_order"]


def _mesh() -> dict[str, int]:
    tr = current_trace()
    if tr is None or not tr.mesh:
        raise fail("to_local / redistribute outside a plan trace")
    return dict(tr.mesh)


def _gather_dim(t: Term, d: str) -> Term:
    """ALL_GATHER the shards of ``d``, innermost first, until ``d`` is whole."""
    while True:
        spec = t.dim(d)
        if not spec.shards:
            return t
        a = spec.shards[-1]
        if a.startswith("#"):
            raise fail(f"to_local / redistribute of a chunked dim {spec}: not modelled")
        dims = tuple(DimSpec(x.name, x.shards[:-1]) if x.name == d else x for x in t.dims)
        t = term(Op.ALL_GATHER, (t,), (a, d), dims)


def block_order(actual: tuple[str, ...], mesh: Mapping[str, int]) -> tuple[tuple[str, ...],
                                                                             tuple[int, ...]]:
    """The plain (mesh-order) nesting of ``actual`` and the block order of the PERMUTE that maps
    each rank's plain block index ``j`` to the block ``order[j]`` it really holds."""
    axes = list(mesh)
    plain = tuple(sorted(actual, key=axes.index))
    order = [0] * math.prod(mesh[a] for a in actual)
    for coords in itertools.product(*(range(mesh[a]) for a in actual)):
        r = dict(zip(actual, coords))

        def index(nest: tuple[str, ...]) -> int:
            i = 0
            for a in nest:  # outermost first: mixed radix, the first axis most significant
                i = i * mesh[a] + r[a]
            return i

        order[index(plain)] = index(actual)
    return plain, tuple(order)


def to_local(x: Tensor) -> Tensor:
    """``DTensor.to_local()``: the rank's block, typed with the plain mesh-order nesting.

    Shapes: same dims and local sizes as ``x``. A dim whose shards are already in mesh order is
    unchanged; a strided one (``K[tp,dp]`` on ``Mesh(dp, tp)``) becomes ``K[dp,tp]`` holding the
    same local values (block ``order[j]`` of ``K`` at plain index ``j``, see
    :func:`block_order`).
    """
    mesh = _mesh()
    t = x.term
    for spec in x.term.dims:
        real = tuple(a for a in spec.shards if not a.startswith("#"))
        plain, order = block_order(real, mesh) if real else ((), ())
        if real == plain:
            continue
        g = _gather_dim(t, spec.name)
        clash = [a for a in plain if a in varying_axes(g)]
        if clash:
            raise fail(f"to_local of {x.describe()}: {spec.name} is strided over {clash}, which "
                       f"also shard another dim; not modelled")
        g = term(Op.PERMUTE, (g,), (spec.name, order), g.dims)
        t = lineage(g, {a: _shard(spec.name) for a in plain}, {a: mesh[a] for a in mesh})
    return Tensor(t, user_site(2))


def _shard(d: str) -> Placement:
    from spec_lang.placement import Shard

    return Shard(d)


def redistribute(x: Tensor, placements: Mapping[str, Placement]) -> Tensor:
    """``DTensor.redistribute``: all-gather every sharded dim of ``x``, then take this rank's
    block under ``placements`` (``Shard`` / ``StridedShard`` / ``Replicate`` per axis).

    Raises:
        PlanError: a ``Partial`` target (reduce with a collective instead), a chunked dim, a
            ``Shard`` of a dim ``x`` does not have, a shard that does not divide its dim, a
            ``StridedShard`` whose ``split_factor`` is not the later axes' product.
    """
    mesh = _mesh()
    t = x.term
    for spec in x.term.dims:
        t = _gather_dim(t, spec.name)
    pl = {str(a): p for a, p in placements.items()}
    for a, p in pl.items():
        if not isinstance(p, Replicate) and not hasattr(p, "dim"):
            raise fail(f"redistribute to {p} on {a!r}: only Shard / StridedShard / Replicate")
        if a not in mesh:
            raise fail(f"redistribute: axis {a!r} is not in the mesh {mesh}")
    # the targets must place this tensor: the dim exists, every shard divides, split_factor
    tr = current_trace()
    assert tr is not None
    sizes = {d.name: tr.sizes.get(d.name) for d in t.dims}
    if all(isinstance(n, int) for n in sizes.values()):
        errs = placement_errors(f"redistribute target for {x.describe()}", sizes, pl, mesh,
                                user_site(2))
        if errs:
            raise tr.error(errs[0])
    return Tensor(lineage(t, pl, mesh), user_site(2))
