"""Global-norm gradient clipping across TP / PP / DP (ZeRO) / EP shards, derived from placements.

The spec clips with ``||g||^2 = sum_p sum_elements g_p^2``, every element counted exactly once
(PyTorch's ``clip_grad_norm_``; CASES.md section 4). On a rank, gradient ``g_p`` is a block of
the spec gradient: its type says which mesh axes shard it (``F[tp]``, ``E[ep]``, ``H[dp]`` after
a ZeRO reduce-scatter). The plan's squared norm is then

    nu^2 = sum over groups A of  AR_sum[A]( sum_{p with shard axes A} sum(g_p * g_p) )

(then ``AR_sum[pp]`` of the whole when ``pp`` is given). A gradient ``Shard``-ed over an axis is
summed over it (its blocks are disjoint); over an axis where it is ``Replicate`` it is counted
once (never all-reduced, which would count it ``|axis|`` times: B25). The axes come from the
gradient's *type*, i.e. from the placements the plan gave (the optimizer placement under ZeRO),
never from a per-parameter flag; an optional ``placements`` map is cross-checked against them.

Sources: Megatron-LM ``clip_grads.get_grad_norm_fp32`` (sum of squares, all-reduce over the model
parallel group, replicated tensors counted on one rank), torchtitan ``clip_grad_norm_`` with
pipeline parallelism (``AR_sum[pp]`` of the stages' squared norms, issue #596), DeepSpeed
expert-parallel clipping (PR #8478: expert norms summed over ep, dense norms once).

Limits: a gradient that varies over an axis on which it is not sharded (an unreduced
``Partial``) is counted once there, like a replicated one; the prover then refutes the plan,
because that gradient (and so the norm) differs from the spec's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from spec_lang import ops
from spec_lang.collectives import all_reduce
from spec_lang.errors import PlanError
from spec_lang.mesh import Mesh
from spec_lang.placement import Placement, Shard
from spec_lang.tensor import Tensor, user_site
from spec_lang.term import Axis, Op

__all__ = ["shard_axes", "global_grad_norm_sq", "grad_norm_sq_fn"]

_AXIS_ORDER = tuple(str(a) for a in Axis)


def shard_axes(g: Tensor) -> tuple[str, ...]:
    """The mesh axes that shard local gradient ``g`` (from its type), in a fixed order.

    ``g: (H, F[tp])`` -> ``("tp",)``; ``(E[ep], H)`` -> ``("ep",)``; ``(H[dp], F[tp])`` ->
    ``("dp", "tp")``. The micro-batch pseudo-axis ``mb`` and chunk markers (``#i/n``) are not
    mesh axes and are skipped.
    """
    axes = {a for ds in g.term.dims for a in ds.shards
            if not a.startswith("#") and a != str(Axis.MB)}
    return tuple(sorted(axes, key=lambda a: (_AXIS_ORDER.index(a) if a in _AXIS_ORDER
                                             else len(_AXIS_ORDER), a)))


def _check_placement(name: str, axes: tuple[str, ...], placement: Mapping[str, Placement],
                     site: str) -> None:
    declared = {str(a) for a, p in placement.items() if isinstance(p, Shard)}
    if declared != set(axes):
        raise PlanError(f"{site}: global_grad_norm_sq: gradient {name!r} is sharded over "
                        f"{sorted(axes) or 'no axis'} by its type but the placements given say "
                        f"Shard over {sorted(declared) or 'no axis'}; pass the placements of the "
                        "gradients handed to the optimizer (optimizer_placements under ZeRO)")


def _local_sq(g: Tensor, pp: str | None) -> Tensor:
    """``sum(g * g)``; a pipeline-held gradient ``RANK_CONST(pp, e) * x`` (held only on the
    stages where ``e`` is 1, ``Pipeline.held_grads``) gives ``RANK_CONST(pp, e*e) * sum(x * x)``
    (the same value, written so the ``pp`` reduction of the stages' norms simplifies)."""
    t = g.term
    if (pp is not None and t.op is Op.MUL and len(t.args) == 2
            and t.args[0].op is Op.RANK_CONST and t.args[0].attrs[0] == str(pp)):
        x = Tensor(t.args[1], g.site, g.name)
        return ops.rank_const(str(pp), [v * v for v in t.args[0].attrs[1]]) * ops.sum(x * x)
    return ops.sum(g * g)


def global_grad_norm_sq(grads: Mapping[str, Tensor],
                        placements: Mapping[str, Mapping[str, Placement]] | None = None,
                        *, mesh: Mesh | Iterable[str] | None = None,
                        pp: str | None = None, site: str | None = None) -> Tensor:
    """The global squared gradient norm ``||g||^2`` from this rank's local gradients.

    For each gradient: ``sum(g * g)`` locally; gradients with the same set of shard axes are
    added, and each group is all-reduced (sum) over exactly its shard axes; the groups are added.
    With ``pp``, the total is finally all-reduced over the pipeline-stage axis.

    Args:
        grads: parameter name -> local gradient, as handed to the optimizer (the dict
            ``Plan(grad_norm_sq=...)`` receives). Shapes: any; a scalar result.
        placements: optional name -> ``{axis: Placement}`` of those gradients (the optimizer
            placement); checked against each gradient's type.
        mesh: optional mesh (or its axis names): every shard axis must be one of its axes.
        pp: the pipeline-stage axis. Each stage's ``grads`` holds only the parameters that
            stage owns (the stages' sets are disjoint; a tied weight is passed by one stage
            only), so the stages' squared norms are summed over ``pp`` (torchtitan #596).
            ``pp`` is then not used as a per-gradient shard axis (no double count).
        site: ``file:line`` for error messages (default: the caller's line).

    Returns:
        a scalar tensor, replicated over every mesh axis.

    Raises:
        PlanError: a placement disagrees with a gradient's type; a shard axis or ``pp`` not in
            ``mesh``.
    """
    site = site or user_site(2)
    mesh_axes = None if mesh is None else tuple(str(a) for a in mesh)
    if pp is not None and mesh_axes is not None and str(pp) not in mesh_axes:
        raise PlanError(f"{site}: global_grad_norm_sq(pp={pp!r}): no such axis in the mesh "
                        f"{list(mesh_axes)}")
    groups: dict[tuple[str, ...], Tensor] = {}
    for name, g in grads.items():
        axes = shard_axes(g)
        if placements is not None:
            _check_placement(name, axes, placements.get(name, {}), site)
        if mesh_axes is not None:
            bad = [a for a in axes if a not in mesh_axes]
            if bad:
                raise PlanError(f"{site}: global_grad_norm_sq: gradient {name!r} is sharded over "
                                f"{bad}, not in the mesh {list(mesh_axes)}")
        if pp is not None:
            axes = tuple(a for a in axes if a != str(pp))
        sq = _local_sq(g, pp)
        groups[axes] = sq if axes not in groups else groups[axes] + sq
    total: Tensor | None = None
    for axes, sq in groups.items():
        for a in axes:
            sq = all_reduce(sq, a, "sum")
        total = sq if total is None else total + sq
    if total is None:
        return ops.const(0)
    if pp is not None:
        total = all_reduce(total, pp, "sum")
    return total


def grad_norm_sq_fn(placements: Mapping[str, Mapping[str, Placement]] | None = None, *,
                    mesh: Mesh | Iterable[str] | None = None, pp: str | None = None):
    """``Plan(grad_norm_sq=grad_norm_sq_fn(...))``: :func:`global_grad_norm_sq` with its
    placements / mesh / ``pp`` bound; errors name the line that called this function."""
    site = user_site(2)

    def grad_norm_sq(grads: Mapping[str, Tensor]) -> Tensor:
        return global_grad_norm_sq(grads, placements, mesh=mesh, pp=pp, site=site)

    return grad_norm_sq
