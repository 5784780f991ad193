"""Captured constants of a traced graph (``get_attr`` nodes: tensors, process groups,
reduce ops) compared across traced ranks and sizes (:class:`literals.Traces`,
:mod:`real_ranks`), and the words a refusal uses when one differs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch.fx as fx

__all__ = ["constant_differs_text", "held_text", "same_constant"]


def held_text(v: Any) -> str | None:
    """Why a captured constant ``v`` held on ``meta`` (a copy of the model made in
    ``parallelize``: an EMA, R46f-5, :mod:`deep_copies`; a constant of over 4096 values, stored
    as its shape: :mod:`tracedata`) has no values to read, or None for another constant."""
    import torch  # noqa: PLC0415

    if not (isinstance(v, torch.Tensor) and v.device.type == "meta"):
        return None
    return (f"a tensor of shape {tuple(v.shape)} the step reads but neither makes nor takes as "
            "an input (made before it: a copy of the model or of its tensors such as an EMA, a "
            "tensor attribute, or a constant of over 4096 values), whose values the capture "
            "does not have")


def constant_differs_text(mine: Any, target: str, where: str) -> str:
    """Why a captured constant that differs ``where`` ("at rank {...}", "from the zero
    coordinate's") cannot be read: a process group that is no mesh axis's, said so (round 36),
    or a tensor built from a size or the rank."""
    from spec_lang.torch_frontend.tracedata import ProcessGroupRef  # noqa: PLC0415

    if type(mine) is ProcessGroupRef:
        return (f"the process group a collective uses differs {where}: it is no mesh axis's "
                "group (a dist.new_group whose ranks are not exactly one mesh axis's ranks, "
                "one made with a backend or pg_options of the train file's, or a group made "
                "differently per rank); use mesh.get_group(axis), or new_group with one axis's "
                "ranks")
    return (f"the captured constant {target} differs {where} (a tensor built from a size or "
            "the rank inside the step)")


def same_constant(a: Any, b: Any, g0: Mapping[str, str], gc: Mapping[str, str]) -> bool:
    """Two captured constants mean the same; a process group is each rank's own group of the
    same mesh axis (``g0`` / ``gc``: group name -> axis; round 32d, R32d-4: on dp x tp the dp
    group of tp coordinate 1 is another group than the zero coordinate's, and a rule reads its
    axis per rank, :meth:`Traces.pg_axis`)."""
    import torch  # noqa: PLC0415

    from spec_lang.torch_frontend.tracedata import ProcessGroupRef  # noqa: PLC0415

    if type(a) is ProcessGroupRef and type(b) is ProcessGroupRef \
            and a.group_name in g0 and b.group_name in gc:
        return g0[a.group_name] == gc[b.group_name]
    # (a group of no mesh axis of the trace, the pipeline's once stages are composed: compared
    # as any constant, and its axis where a rule reads it, ``Traces.pg_axis``)
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return (a.shape == b.shape and a.dtype == b.dtype
                and (a.device.type == "meta" or b.device.type == "meta" or bool(torch.equal(a, b))))
    return _skeleton(a) == _skeleton(b)


def _skeleton(v: Any) -> Any:
    """``v`` with every node reference replaced (the references are
    :func:`literals._check_refs`'s),
    types kept (``1`` and ``1.0`` and ``True`` differ)."""
    if isinstance(v, fx.Node):
        return ("<node>",)
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_skeleton(x) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple((k, _skeleton(v[k])) for k in sorted(v, key=repr)))
    return (type(v).__name__, repr(v))
