"""Activation checkpointing under FSDP2 / ``replicate``, and which backward passes the modelled
gradient reductions stand for (:mod:`spec_lang.torch_frontend.dataparallel`).

* **Recomputation** (R39a-2, R40a-3, R40a-4): torch's ``checkpoint`` (the ``CheckpointWrapper``
  torchtitan's ``apply_ac`` makes, or ``checkpoint(...)`` called in a ``forward``) runs a block's
  forward again in the backward, after the unit's forward has ended; FSDP2 gathers the unit's
  parameters for it in its pre-backward hook. :func:`recompute_hooks` gives the recomputed
  modules the unit's views again, only while torch's own recomputation functions are on the
  stack (:func:`in_recomputation`).
* **The backward passes DDP and FSDP2 reduce** (R40a-5): DDP's reducer and FSDP2's
  post-backward reduce the gradients that ``Tensor.backward`` / ``torch.autograd.backward``
  accumulate into ``.grad``, once per forward for DDP. The front end models the reduction as the
  backward of the unit's parameter view, which also runs under ``torch.autograd.grad`` and in
  a second backward over one forward (``retain_graph``): :func:`reduction_refused` refuses
  those (the real run leaves each rank's own gradient there).
* **A parameter written between the forward and the backward** (R41a-1): FSDP2 gathers it
  again for the backward; :func:`gathered_then_written` refuses it.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

from spec_lang.errors import PlanError
from spec_lang.torch_frontend.storage_writes import count

__all__ = ["recompute_hooks", "in_recomputation", "reduction_refused",
           "outside_selective_checkpoint", "gathered_then_written", "saved_alias_refused",
           "param_versions"]


def recompute_hooks(u: Any, mine: list, new: Mapping[str, Any], orig: Mapping[str, Any],
                    running: list[bool], unit_view: Callable[..., Any]) -> list[Any]:
    """Hooks on every module under the unit's module that holds parameters of the unit:
    activation checkpointing (torch's ``checkpoint``: the ``CheckpointWrapper`` torchtitan's
    ``apply_ac`` makes, or ``checkpoint(...)`` called in a ``forward``) runs a block's forward
    again in the backward, after the unit's forward has ended, and FSDP2 gathers the unit's
    parameters for it in its pre-backward hook (torch's ``_fsdp_state._pre_backward``), so the
    first module the recomputation calls gets the unit's views of the parameters under it again
    (another all-gather, as FSDP2 does with ``reshard_after_forward``); a module it calls inside
    that one finds them in place. Only during torch's recomputation
    (:func:`in_recomputation`) outside the unit's forward: a block run in the backward by
    anything else (a custom ``autograd.Function``) sees what the unit stores, as in the real
    run (R40a-4). The restoring hook is ``always_call``: torch stops a recomputation early by
    raising in it (R39a-2, R40a-3). The gather runs outside selective activation
    checkpointing's dispatch modes, as FSDP2's pre-backward all-gather does (R40a-6)."""
    hooks = []
    by: list[Any] = [None]                   # the module whose hook put the views in place
    before: dict[tuple[int, str], Any] = {}  # what was registered then (S42-1: a held view)
    for m in u.module.modules():
        if m is u.module:
            continue
        under = {id(x) for x in m.modules()}
        sub = [(n, [(h, a) for h, a in hs if id(h) in under]) for n, hs in mine]
        sub = [(n, hs) for n, hs in sub if hs]
        if not sub:
            continue

        def pre(module: Any, args: Any, sub: Any = sub) -> None:
            if running[0] or by[0] is not None or not in_recomputation():
                return
            by[0] = module
            with outside_selective_checkpoint() as sac:
                if getattr(u, "fsdp_state", u.kind != "ddp"):
                    saved_alias_refused(sac, getattr(u, "settings", {}).get("_site", ""))
                before.clear()
                for n, hs in sub:
                    view = unit_view(u, new[n], orig[n])
                    for mod, attr in hs:
                        before[id(mod), attr] = mod._parameters[attr]  # noqa: SLF001
                        mod._parameters[attr] = view  # noqa: SLF001

        def post(module: Any, args: Any, out: Any, sub: Any = sub) -> None:
            if by[0] is not module:
                return
            by[0] = None
            for n, hs in sub:
                for mod, attr in hs:
                    mod._parameters[attr] = before.get((id(mod), attr), new[n])  # noqa: SLF001
            before.clear()

        hooks.append(m.register_forward_pre_hook(pre))
        hooks.append(m.register_forward_hook(post, always_call=True))
    return hooks


@contextlib.contextmanager
def outside_selective_checkpoint() -> Iterator[list[Any]]:
    """Take torch's selective-activation-checkpointing dispatch modes (what
    ``create_selective_checkpoint_contexts`` makes: the forward's ``_CachingTorchDispatchMode``,
    the recomputation's ``_CachedTorchDispatchMode``, exact classes) off the top of the
    dispatch-mode stack for the body, and put them back after it.

    The recomputation replays the forward's operators one for one from SAC's log and raises on
    any it did not record ("encountered during backward but not found in storage"); the
    recomputation's gather is not in the forward's log, since the forward's gather ran in the
    unit's pre-hook outside the checkpointed region, and in the real run FSDP2 gathers in its
    pre-backward hook, outside it too (R40a-6). A mode above them that is not SAC's stays, and
    then nothing is taken off. Yields the modes taken off."""
    from torch.utils import _python_dispatch as pd  # noqa: PLC0415

    sac = _sac_mode_types()
    taken = []
    while (top := pd._get_current_dispatch_mode()) is not None and type(top) in sac:
        taken.append(pd._pop_mode())  # noqa: SLF001
    try:
        yield taken
    finally:
        for mode in reversed(taken):
            pd._push_mode(mode)  # noqa: SLF001


def saved_alias_refused(modes: list[Any], site: str) -> None:
    """Refuse a selective-checkpointing log (``modes``: SAC's dispatch modes taken off for a
    ``fully_shard`` unit's recomputation) that saved the output of an operator aliasing its
    input (``aten.t``, ``aten.view``, ``aten.detach``, ...).

    FSDP2 frees the unsharded parameters after the forward and all-gathers them again into the
    same storage for the backward, so a saved view of a gathered weight reads what the
    parameter holds then (a write between the forward and the backward through ``.data``
    reaches it, R41c-4); the capture's gather is a fresh tensor. Saved outputs of other
    operators (``aten.mm``: torchtitan's policy) are new tensors in both.

    Raises:
        PlanError: naming the operator and the unit's ``fully_shard`` line.
    """
    import torch.utils.checkpoint as ck  # noqa: PLC0415

    for mode in modes:
        for func, entries in getattr(mode, "storage", {}).items():
            schema = getattr(func, "_schema", None)
            if schema is None or not any(r.alias_info is not None for r in schema.returns):
                continue
            if any(e is not ck._RECOMPUTE for e in entries.values()):  # noqa: SLF001
                where = f"{site}: " if site else ""
                raise PlanError(
                    f"{where}selective activation checkpointing under fully_shard saves the "
                    f"output of {func}, a view of its input: FSDP2 gathers the parameters "
                    "again for the backward into the storage such a view shares, which prove "
                    "--torch does not model (R41c-4); save the operator that consumes it "
                    "(aten.mm) instead")


def _sac_mode_types() -> tuple[type, ...]:
    import torch.utils.checkpoint as ck  # noqa: PLC0415

    return (ck._CachingTorchDispatchMode, ck._CachedTorchDispatchMode)  # noqa: SLF001


def in_recomputation() -> bool:
    """The autograd engine is running and torch's checkpoint is recomputing a forward: a frame
    of the non-reentrant ``recompute_fn`` or of the reentrant ``CheckpointFunction.backward``
    (``torch/utils/checkpoint.py``) is on the stack."""
    if torch._C._current_graph_task_id() == -1:  # noqa: SLF001
        return False
    codes = _recompute_codes()
    f = sys._getframe(1)  # noqa: SLF001
    while f is not None:
        if codes.get(id(f.f_code)) is f.f_code:      # torch's code objects themselves
            return True
        f = f.f_back
    return False


@functools.lru_cache(maxsize=1)
def _recompute_codes() -> dict[int, types.CodeType]:
    """``id -> code`` of torch's two recomputation functions (both must be found: a test)."""
    import torch.utils.checkpoint as ck  # noqa: PLC0415

    outer = ck._checkpoint_without_reentrant_generator.__code__  # noqa: SLF001
    codes = [ck.CheckpointFunction.backward.__code__,
             *(c for c in outer.co_consts
               if isinstance(c, types.CodeType) and c.co_name == "recompute_fn")]
    return {id(c): c for c in codes}


def reduction_refused(ctx: Any, what: str) -> None:
    """Called by the backward of a unit's parameter view (``what``: ``fully_shard`` /
    ``replicate``).

    Raises:
        PlanError: the backward pass was not started by ``Tensor.backward`` /
            ``torch.autograd.backward`` (``torch.autograd.grad``: neither DDP's hooks on the
            gradient accumulation nor FSDP2's post-backward reduce what it returns), or it is
            a second backward pass over one forward of a ``replicate`` unit (DDP's reducer is
            armed by the forward and finalised by the first backward). R40a-5.
    """
    run = _engine_frame()
    kwargs = run.f_locals.get("kwargs") if run is not None else None
    site = f"{ctx.site}: " if getattr(ctx, "site", "") else ""
    if not isinstance(kwargs, dict) or kwargs.get("accumulate_grad") is not True:
        raise PlanError(f"{site}the gradient of a parameter of {what} is taken by "
                        "torch.autograd.grad (or another call than Tensor.backward): "
                        f"{what} reduces only what .backward() accumulates into .grad, so "
                        "each rank would keep its own gradient; use loss.backward()")
    if what == "replicate":
        if getattr(ctx, "reduced", False):
            raise PlanError(f"{site}a second backward pass over one forward of a replicate "
                            "(DDP) module: DDP all-reduces the gradients of the first only; "
                            "sum the losses and call backward once")
        ctx.reduced = True


def gathered_then_written(ctx: Any) -> None:
    """Called by the backward of a ``fully_shard`` unit's gathered view: the stored parameter
    it was gathered from (``ctx.stored``, its version ``ctx.version`` at the gather) is
    unchanged.

    FSDP2 frees the unsharded parameter after the forward and all-gathers it again for the
    backward, so a parameter written in place in between (``with torch.no_grad():
    w.mul_(2)``) reaches the real backward's weight gradients, and an activation saved as a
    view of the unsharded storage (selective activation checkpointing saving ``aten.t`` of
    the weight) reads the new value; the capture's gather is a fresh tensor holding the
    forward's value (R41a-1).

    Raises:
        PlanError: the shard was written between the gather and this backward.
    """
    if ctx.stored is not None and param_versions(ctx.stored) != ctx.version:
        site = f"{ctx.site}: " if getattr(ctx, "site", "") else ""
        raise PlanError(f"{site}a parameter of fully_shard is written in place between its "
                        "all-gather for the forward and the backward: FSDP2 gathers it again "
                        "for the backward, so the real gradients (and activations saved as "
                        "views of the gathered parameter) see the new value, which prove "
                        "--torch does not model; change parameters only in the optimizer step")


def param_versions(p: Any) -> tuple[int, ...]:
    """The version counters of a parameter and of its local tensor (under ``make_fx`` an
    in-place op on a DTensor bumps the DTensor's own counter, ``to_local().mul_()`` the
    local's) and the writes into its storage :func:`storage_writes.count` saw (``.data``,
    collectives: R43e-1, R43e-4); ``()`` for no parameter. Read at a gather and again at its
    backward (:func:`gathered_then_written`)."""
    if p is None:
        return ()
    local = getattr(p, "_local_tensor", None)
    return (p._version,) + ((local._version,) if local is not None else ()) + (count(p),)


def _engine_frame() -> Any:
    """The innermost frame of torch's ``_engine_run_backward`` (its ``kwargs`` say whether the
    engine accumulates into ``.grad``), or None."""
    import torch.autograd.graph as g  # noqa: PLC0415

    code = g._engine_run_backward.__code__  # noqa: SLF001
    f = sys._getframe(2)  # noqa: SLF001
    while f is not None and f.f_code is not code:
        f = f.f_back
    return f
