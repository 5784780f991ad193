"""When an FSDP2 state registers its unsharded parameters inside the backward (torch 2.13
``_fsdp_state.FSDPState._pre_backward`` / ``_register_pre_backward_hook``,
``_fsdp_param_group.FSDPParamGroup._register_post_backward_hook`` and
``RegisterPostBackwardFunction``; adversarial round 44b, R44b-1).

* **pre-backward**: FSDP2's post-forward puts a hook on every output tensor of the unit's
  forward that requires grad; when the backward reaches one, the unit unshards (registers its
  one unsharded parameter object again: the stand-in's last forward's views,
  :meth:`fsdp_hold.Hold.pre_backward`) and the final callback is queued.
* **post-backward**: FSDP2's pre-forward passes the forward's tensor inputs that require grad
  through ``RegisterPostBackwardFunction``; its backward (the gradient reaching the unit's
  inputs) reshards the unit (:meth:`fsdp_hold.Hold.in_backward`). A forward none of whose
  inputs requires grad (the root's ``model(x)``, a first layer) registers none, and its unit
  stays unsharded until the root's final callback (:func:`fsdp_hold._final`). The stand-in
  released a unit at its own parameters' gradient (``GatherShard``'s backward), so a tensor
  hook the engine ran later saw the stored parameter where the real run holds the unsharded
  one (R44b-1: an identity read, a write lost at the reshard for real).

A ``fully_shard([a, b])`` group is one state: its post-backward reshards every member.
Neither is applied inside checkpoint's recomputation (FSDP2's ``PRE_BACKWARD`` state returns
early) nor to a pipeline stage's step leaves (:mod:`pp_leaves` registers those).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_leaves, tree_unflatten

from spec_lang.torch_frontend.fsdp_grads import flush_state

__all__ = ["RegisterPostBackward", "post_backward_inputs", "pre_backward_outputs",
           "hook_slots", "into_slots"]


class RegisterPostBackward(torch.autograd.Function):
    """FSDP2's ``RegisterPostBackwardFunction``: identity forward on the unit's inputs that
    require grad; the backward is the unit's post-backward (every hold of ``holds``)."""

    @staticmethod
    def forward(ctx: Any, holds: Sequence[Any], *inputs: torch.Tensor) -> Any:
        ctx.holds = holds
        return inputs           # as FSDP2's: autograd makes the outputs views of the inputs

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        for h in ctx.holds:     # the whole group reshards, then its gradients are set
            h.in_backward()     # (torch 2.13 post_backward, then foreach_reduce: R46c-2)
        flush_state(list(ctx.holds))
        return (None, *grads)


def post_backward_inputs(holds: Sequence[Any], args: tuple, kwargs: dict
                         ) -> tuple[tuple, dict] | None:
    """The forward's ``(args, kwargs)`` with every tensor that requires grad passed through
    :class:`RegisterPostBackward` (FSDP2's ``_register_post_backward_hook``), or None: grad
    mode off or no such tensor (no post-backward: the final callback reshards)."""
    if not torch.is_grad_enabled():
        return None
    flat, spec = tree_flatten((args, kwargs))
    idx = [i for i, x in enumerate(flat) if isinstance(x, torch.Tensor) and x.requires_grad]
    if not idx:
        return None
    outs = RegisterPostBackward.apply(tuple(holds), *[flat[i] for i in idx])
    for i, o in zip(idx, outs):
        flat[i] = o
    return tree_unflatten(flat, spec)


def pre_backward_outputs(holds: Sequence[Any], out: Any) -> None:
    """FSDP2's ``_register_pre_backward_hook``: a hook on every output tensor that requires
    grad, registering each hold's views again when the backward reaches it."""
    def hook(grad: Any, holds: tuple = tuple(holds)) -> None:  # noqa: ARG001
        for h in holds:
            h.pre_backward()

    for t in tree_leaves(out):
        if isinstance(t, torch.Tensor) and t.requires_grad:
            t.register_hook(hook)



def _slot(*args: Any) -> None:
    """A hook that does nothing: the place FSDP2 registers its own hook at."""
    return None


def hook_slots(module: Any) -> tuple[int, int]:
    """At a ``fully_shard`` / FSDP-based ``replicate`` call: hold the places FSDP2 registers
    its forward hooks at (torch 2.13 ``_register_group_forward_hooks``, ``prepend=True`` for
    the pre-hook, appended for the post-hook) with hooks that do nothing; returns their keys
    (round 44c, R44c-3; round 44d, R44d-1 / R44d-2: a user's hook registered after the call,
    with or without ``prepend``, runs where it runs around FSDP2's)."""
    pre = module.register_forward_pre_hook(_slot, prepend=True)
    post = module.register_forward_hook(_slot)
    return (pre.id, post.id)


def into_slots(module: Any, pre: int, post: int, slots: tuple[int, int] | None) -> None:
    """Move the stand-in's pre-hook ``pre`` and post-hook ``post`` (keys in the module's hook
    tables) to just before the slots :func:`hook_slots` held, so they run where FSDP2's would.
    Nothing when ``slots`` is None (a DDP-style ``replicate``: its hooks stay appended)."""
    if slots is None:
        return
    for table, key, slot in ((module._forward_pre_hooks, pre, slots[0]),  # noqa: SLF001
                             (module._forward_hooks, post, slots[1])):  # noqa: SLF001
        if slot not in table:       # the user removed every hook: the stand-in's stay last
            continue
        order = []
        for k in list(table):
            if k == key:
                continue
            order += [key, k] if k == slot else [k]
        for k in order:
            table.move_to_end(k)
