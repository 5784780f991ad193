"""How a data-parallel unit's parameter is stored on a rank between steps (what the optimizer
holds and updates), for :mod:`capture`'s inputs.

* ``fully_shard`` (FSDP2): a ``DTensor`` sharded along its shard dim over the unit's shard axis
  (``Shard(d)``, or ``_StridedShard(d)`` when tensor parallelism already shards ``d``),
  replicated over an HSDP replicate axis, with its tensor-parallel placements on the other
  axes (torch 2.13 ``FSDPParam._init_sharded_param``);
* torch 2.13's FSDP-based ``replicate`` (``torch.distributed._composable.replicate_with_fsdp``:
  FSDP2 with a ``DDPMeshInfo``): a ``DTensor`` ``Replicate()`` over the unit's axes, with its
  tensor-parallel placements on the others (round 43d, R43d-7: stored as a plain tensor, an
  ``isinstance(p, DTensor)`` read before the forward differed from the real run);
* DDP-style composable ``replicate``: the parameter as it is (one object, plain or the
  tensor-parallel ``DTensor``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.placement_types import Replicate, Shard

from spec_lang.errors import PlanError

__all__ = ["stored_spec", "spec_placements", "spec_local_shape"]


def _root_submesh(axes_names: list[str], any_mesh: Any) -> Any:
    root = any_mesh._get_root_mesh()  # noqa: SLF001 -- DeviceMesh has no public root accessor
    order = list(root.mesh_dim_names)
    names = tuple(sorted(set(axes_names), key=order.index))
    return root[names]


def stored_spec(n: str, p: Any, own: Any, path: str) -> Any:
    """How parameter ``p`` is stored on a rank: ``(mesh, placements, shape, stride)`` of its
    DTensor (module docstring), or None for a plain tensor.

    Raises:
        PlanError: an FSDP2 shard dim that the data-parallel axis does not divide (FSDP2 would
            pad it; uneven shards are not modelled), named at the ``fully_shard`` call's line,
            with the tensor-parallel shard that made the local size when there is one.
    """
    from torch.distributed.tensor.placement_types import _StridedShard

    unit = own[0] if own is not None else None
    if unit is None or not unit.fsdp_state:
        return (p.device_mesh, p.placements, p.shape, p.stride()) if isinstance(p, DTensor) \
            else None
    sharded = unit.kind == "fsdp"
    loc_t = p._local_tensor if isinstance(p, DTensor) else p  # noqa: SLF001
    d = 0
    if sharded and unit.shard_placement_fn is not None:
        got = unit.shard_placement_fn(p)
        d = got.dim if got is not None else 0
    loc = loc_t.shape
    ns = unit.mesh.size(unit.mesh.ndim - 1)
    if sharded and loc[d] % ns:
        raise PlanError(f"{unit.settings.get('_site', path)}: fully_shard shards {n} dim {d} "
                        f"(local size {loc[d]}) over {unit.shard_axis!r} (size {ns}), which "
                        f"does not divide it{_earlier_shards(p, d)} (FSDP2 pads; uneven shards "
                        "are not modelled)")
    tp_names = list(p.device_mesh.mesh_dim_names) if isinstance(p, DTensor) else []
    tp_pl = dict(zip(tp_names, p.placements)) if isinstance(p, DTensor) else {}
    dp_names = list(unit.mesh.mesh_dim_names)
    mesh = _root_submesh(dp_names + tp_names, unit.mesh)
    tp_shards_d = sum(1 for q in tp_pl.values() if isinstance(q, Shard) and q.dim == d)
    pls = []
    for a in mesh.mesh_dim_names:
        if sharded and a == unit.shard_axis:
            if tp_shards_d:
                sf = 1
                for b, q in tp_pl.items():
                    if isinstance(q, Shard) and q.dim == d:
                        sf *= mesh.size(list(mesh.mesh_dim_names).index(b))
                pls.append(_StridedShard(d, split_factor=sf))
            else:
                pls.append(Shard(d))
        elif a in tp_pl:
            pls.append(tp_pl[a])
        else:
            pls.append(Replicate())
    shape = tuple(p.shape)
    stride = torch.empty(shape, device="meta").stride()
    return (mesh, tuple(pls), torch.Size(shape), stride)


def _earlier_shards(p: Any, d: int) -> str:
    """Where a local size came from when tensor parallelism sharded dim ``d`` of ``p`` first
    (``p`` a DTensor): ``"; that local size comes from an earlier shard: 'tp' (size 3) split
    its 32 unevenly (32 is not a multiple of 3)"``, or ``""`` (new-user trial 53, item B)."""
    if not isinstance(p, DTensor):
        return ""
    mesh = p.device_mesh
    axes = [(a, mesh.size(i)) for i, (a, q) in enumerate(zip(mesh.mesh_dim_names, p.placements))
            if isinstance(q, Shard) and q.dim == d]
    if not axes:
        return ""
    k = 1
    for _, m in axes:
        k *= m
    full = p.shape[d]
    names = " x ".join(f"{a!r} (size {m})" for a, m in axes)
    how = "evenly" if full % k == 0 else f"unevenly ({full} is not a multiple of {k})"
    return f"; that local size comes from an earlier shard: {names} split its {full} {how}"


def spec_placements(spec: Any, axes: list[str]) -> tuple[str, ...]:
    """A stored spec's placement per world axis (strings, as ``capture.placement_str``)."""
    from spec_lang.torch_frontend.capture import placement_str  # noqa: PLC0415

    if spec is None:
        return tuple("R" for _ in axes) if axes else ()
    by = {a: placement_str(q) for a, q in zip(spec[0].mesh_dim_names, spec[1])}
    return tuple(by.get(a, "R") for a in axes)


def spec_local_shape(spec: Any, p: Any) -> tuple[int, ...]:
    if spec is None:
        return tuple(p.shape)
    mesh, pls, shape, _ = spec
    sizes = {a: mesh.size(i) for i, a in enumerate(mesh.mesh_dim_names)}
    out = list(shape)
    for a, q in zip(mesh.mesh_dim_names, pls):
        if isinstance(q, Shard) or type(q).__name__ == "_StridedShard":
            if out[q.dim] % sizes[a]:
                raise PlanError(f"a parameter of shape {tuple(shape)} is sharded unevenly")
            out[q.dim] //= sizes[a]
    return tuple(out)
