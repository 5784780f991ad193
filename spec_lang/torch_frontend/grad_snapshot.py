"""When the gradient goals are read: the first entry into torch's norm clipping or into the
optimizer's ``step`` (moved out of :mod:`capture`; adversarial finding R41e-3).

A gradient goal (``grad:<name>``) is the gradient "as it is handed on": after the user's own
reductions, before clipping and the update. The capture snapshots every parameter's gradient
the first time the step enters

* ``torch.nn.utils.clip_grad_norm_`` (the single-device spec's usual clip),
* ``torch.nn.utils.clip_grads_with_norm_`` (torch's second half of ``clip_grad_norm_``, which
  torchtitan's ``clip_grad_norm_`` calls after ``get_total_norm`` and the all-reduce of the
  squared norm over ``pp``: PP x DP / PP x FSDP2 clipping across stages), or
* the optimizer's ``step`` (torch's global optimizer step pre-hook).

R41e-3: with only ``clip_grad_norm_`` wrapped, a plan clipping as torchtitan does had its
gradients read at ``optimizer.step()``, *after* the clip, and compared with the spec's read
before it: plan / spec = the clip coefficient (0.00104 on r41e_04), a false NOT EQUIVALENT.
``get_total_norm`` is deliberately not a trigger: it only reads the gradients (a norm logged
before the user's own dp reduction would snapshot unreduced gradients); torchtitan's form calls
``clip_grads_with_norm_`` right after it, with the gradients unchanged in between.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["snapshot_on_entry"]


@contextlib.contextmanager
def snapshot_on_entry(opt: Any, snapshot: Callable[[], None]) -> Iterator[Any]:
    """Call ``snapshot()`` when ``torch.nn.utils.clip_grad_norm_``,
    ``torch.nn.utils.clip_grads_with_norm_`` or ``opt.step`` is entered (``snapshot`` itself
    keeps only the first call's values).

    The two clipping functions are replaced for the duration (their names in
    ``torch.nn.utils`` and in ``torch.nn.utils.clip_grad``, which ``clip_grad_norm_`` calls
    ``_clip_grads_with_norm_`` through); ``opt.step`` is observed through torch's global
    optimizer step pre-hook registry, not on the optimizer: a train file reading
    ``vars(optimizer)`` or its own hook dicts sees what it sees outside the capture
    (adversarial findings R7-1 r7_11, R7-3 r7_07; code inspecting torch's private global
    registries can still see it: a stated assumption of the verdict). Yields the hook, which
    :mod:`step_state` reads as ours. Source: R41e-3 (``clip_grads_with_norm_``).
    """
    import torch.nn.utils as nnu
    import torch.nn.utils.clip_grad as cg
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    def entering(real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*a: Any, **k: Any) -> Any:
            snapshot()
            return real(*a, **k)
        return wrapped

    def on_step(optimizer: Any, args: Any, kwargs: Any) -> None:  # noqa: ARG001
        if optimizer is opt:
            snapshot()

    patched = [(nnu, "clip_grad_norm_"), (cg, "clip_grad_norm_"),
               (nnu, "clip_grads_with_norm_"), (cg, "_clip_grads_with_norm_")]
    real = [(owner, name, getattr(owner, name)) for owner, name in patched]
    for owner, name, fn in real:
        setattr(owner, name, entering(fn))
    handle = register_optimizer_step_pre_hook(on_step)
    try:
        yield on_step
    finally:
        for owner, name, fn in real:
            setattr(owner, name, fn)
        handle.remove()
