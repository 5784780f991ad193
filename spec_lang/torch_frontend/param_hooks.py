"""Gradient hooks put on a parameter before the training step, refused (``prove --torch``).

The step is traced on fresh ``nn.Parameter`` objects (``spec_lang/torch_frontend/capture.py``),
so a hook registered on a parameter or on its gradient accumulator before ``train_step`` (in
``build_model`` or ``parallelize``) would be dropped silently: adversarial findings R3-4, R4-9
(hooks on the tensor) and R6-8 (hooks on its ``AccumulateGrad`` node), ``tests/adversarial/
ATTEMPTS.md``.
"""

from __future__ import annotations

import functools
import types
from pathlib import Path
from typing import Any

import torch

from spec_lang.errors import PlanError

__all__ = ["refuse_parameter_hooks", "accumulator_hooks"]


def refuse_parameter_hooks(params: list[tuple[str, Any]], path: str) -> None:
    """The step is traced on fresh ``nn.Parameter`` objects, so a hook the user registered on a
    parameter before ``train_step`` (``register_hook``, ``register_post_accumulate_grad_hook``,
    typically in ``parallelize``) would be dropped silently (adversarial finding R3-4: a hook
    doubling every gradient was EQUIVALENT). Every hook is refused, a torch function used as one
    too (finding R4-9: ``__module__`` can say ``torch.``); ``fully_shard`` / ``replicate`` are
    modelled from their configuration and put no hook on a parameter here.

    Raises:
        PlanError: naming the parameter and the hook.
    """
    for n, p in params:
        hooks = list((getattr(p, "_backward_hooks", None) or {}).values())
        hooks += list((getattr(p, "_post_accumulate_grad_hooks", None) or {}).values())
        for h in hooks:   # any hook, torch's own functions too (finding R4-9)
            mod = getattr(h, "__module__", "") or ""
            what = getattr(h, "__qualname__", type(h).__name__)
            site = _hook_site(h, path)
            where = "" if site != f"{path}:1" else f", from {mod or 'unknown'}"
            raise PlanError(f"{site}: parameter {n!r} has a gradient hook ({what}{where}) "
                            "registered before train_step; prove --torch "
                            "traces the step on fresh parameters and cannot see it: register "
                            "it inside train_step, or remove it (docs/torch.md, 'Supported "
                            "APIs')")
        if accumulator_hooks(p):
            raise PlanError(f"{path}:1: parameter {n!r} has a hook on its gradient accumulator "
                            "(its AccumulateGrad node, as pre-2.0 DDP and Apex register them) "
                            "registered before train_step; prove --torch traces the step on "
                            "fresh parameters and cannot see it: register it inside "
                            "train_step, or use register_post_accumulate_grad_hook there "
                            "(docs/torch.md, 'Supported APIs')")


def _hook_site(h: Any, path: str) -> str:
    """Where the user's hook ``h`` is defined: ``path:line`` in the train file, ``name.py:line``
    in a file next to it (as the other errors name such lines); else ``path:1`` (stop 54's new
    user: a hook registered in ``parallelize`` was refused at line 1)."""
    while isinstance(h, functools.partial):
        h = h.func
    code = getattr(h, "__code__", None) or getattr(getattr(h, "__func__", None), "__code__", None)
    if not isinstance(code, types.CodeType):
        return f"{path}:1"
    here, train = Path(code.co_filename).resolve(), Path(path).resolve()
    if here == train:
        return f"{path}:{code.co_firstlineno}"
    if here.parent == train.parent and here.suffix == ".py":
        return f"{here.name}:{code.co_firstlineno}"
    return f"{path}:1"


def accumulator_hooks(p: Any) -> int:
    """How many Python hooks and pre-hooks the ``AccumulateGrad`` node of leaf ``p`` holds
    (adversarial finding R6-8: the node's hooks cannot be read from Python, and a node kept alive
    by the user is the one torch's backward would use). Counted by registering a probe of each
    kind: its handle refers to the node's hook dict; the probe is removed at once. A node nobody
    holds is made fresh here (no hooks), as torch's own backward would make it. A frozen leaf
    is read unfrozen (its node keeps its hooks for when it is unfrozen: finding R23-1); a tensor
    that cannot require grad (integer, inference-mode) has none. Runs outside make_fx's
    recording. Raises nothing of its own.
    """
    if not isinstance(p, torch.Tensor) or p.grad_fn is not None:
        return 0
    if not p.requires_grad:
        # a frozen leaf keeps its node (and the node's hooks) for when it is unfrozen, in the
        # step or later (adversarial finding R23-1): read it unfrozen for the count
        try:
            p.requires_grad_(True)
        except RuntimeError:     # an integer or inference tensor: it never has a node
            return 0
        try:
            return accumulator_hooks(p) if p.requires_grad else 0
        finally:
            p.requires_grad_(False)
    from torch.autograd.graph import get_gradient_edge
    from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing

    # outside make_fx's recording: reaching a DTensor parameter's node runs ops (aranges) that
    # would otherwise enter the traced step, at some sizes only (FSDP2 x TP)
    with disable_proxy_modes_tracing():
        node = get_gradient_edge(p).node
        n = 0
        for register in (node.register_hook, node.register_prehook):
            handle = register(_probe)
            held = handle.hooks_dict_ref()
            n += (len(held) - 1) if held is not None else 0
            handle.remove()
    return n


def _probe(*_: Any) -> None:
    return None
