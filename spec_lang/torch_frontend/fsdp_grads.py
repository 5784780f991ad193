"""When FSDP2 sets a sharded parameter's ``.grad``: at its group's post-backward, not when
autograd reaches the parameter (adversarial round 44c, R44c-2).

What torch 2.13 does for real (``_fully_shard/_fsdp_param_group.py`` ``post_backward``,
``_fsdp_collectives.py`` ``foreach_reduce``): the sharded parameter (the optimizer's) is not in
the autograd graph; autograd accumulates the gradient into the unsharded parameter (a leaf),
and the group's post-backward (``RegisterPostBackward``'s backward, or the root's final
callback) reduce-scatters it into the sharded parameter's ``.grad``: set when there is none,
added in place into its local tensor when there is one, then the sharded parameter's
``register_post_accumulate_grad_hook`` hooks run. Its ``register_hook`` hooks never run.

The stand-in's ``dataparallel.GatherShard`` computes the same reduction in its backward; with
:func:`defer` it hands the result to the unit's :class:`fsdp_hold.Hold` instead of to autograd,
and :func:`flush` (the post-backward) sets it. So a hook or a forward run inside the backward
that reads the optimizer's parameter's ``.grad`` sees what the real run holds (R44c-2: the
stand-in set it at once, where the root's is set only by the final callback; a wrong step was
EQUIVALENT). A backward through ``torch.autograd.grad`` (no ``.grad`` accumulated) keeps the
plain gradient flow (:func:`defer` returns False).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed.tensor import DTensor

__all__ = ["defer", "flush"]


def defer(pending: dict[int, list], stored: Any, g: torch.Tensor) -> bool:
    """Keep gradient ``g`` (the stored parameter's local block, already reduced) of
    ``stored`` in ``pending`` (``id(stored)`` -> ``[stored, sum]``) for :func:`flush`, when the
    running backward accumulates into ``stored``'s ``.grad`` (``Tensor.backward`` /
    ``torch.autograd.backward``, ``inputs=`` naming it or not restricted). Returns False (the
    caller hands ``g`` to autograd) for ``torch.autograd.grad`` and when ``stored`` is not a
    leaf parameter."""
    if not isinstance(stored, torch.Tensor) or stored.grad_fn is not None \
            or not stored.requires_grad:
        return False
    from torch.autograd.graph import get_gradient_edge  # noqa: PLC0415
    from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing  # noqa: PLC0415

    with disable_proxy_modes_tracing():     # reaching a DTensor leaf's node runs ops
        node = get_gradient_edge(stored).node
        try:
            accumulates = torch._C._will_engine_execute_node(node)  # noqa: SLF001
        except RuntimeError:        # torch.autograd.grad: nothing accumulates into .grad
            return False
    if not accumulates:
        return True                 # backward(inputs=...) without it: dropped, as autograd
    slot = pending.setdefault(id(stored), [stored, None])
    slot[1] = g if slot[1] is None else slot[1] + g
    return True


def flush(pending: dict[int, list]) -> None:
    """FSDP2's ``foreach_reduce`` end for the group: every kept gradient set as the stored
    parameter's ``.grad`` (a DTensor with the parameter's placements), or added in place into
    the one there; then the parameter's post-accumulate-grad hooks, in their order."""
    items = list(pending.values())
    pending.clear()
    for stored, g in items:
        with torch.no_grad():
            if isinstance(stored, DTensor):
                g = DTensor.from_local(g, stored.device_mesh, stored.placements,
                                       run_check=False, shape=stored.shape,
                                       stride=stored.stride())
            if stored.grad is None:
                stored.grad = g
            else:
                stored.grad.add_(g)
        for hook in list((getattr(stored, "_post_accumulate_grad_hooks", None) or {}).values()):
            hook(stored)
