"""FSDP2 frees its unsharded parameter's memory at every reshard (adversarial round 48a, R48a-2).

What torch 2.13 does for real (``_fully_shard/_fsdp_param.py``): the unsharded parameter is an
``nn.Parameter`` over the all-gather output's memory (``init_unsharded_param``); a reshard
(``to_sharded``: the post-forward of a unit that reshards after its forward, its
post-backward, the root's final callback, ``FSDPModule.reshard()``) registers the sharded
parameter and frees that memory (``free_unsharded_param`` -> ``free_storage``:
``untyped_storage().resize_(0)``); the next unshard (the unit's next forward, its
pre-backward, ``unshard()``) allocates it again and all-gathers into it. The object stays the
same, so a reference kept to it (a forward hook keeping ``mod.weight``, a view of it saved
outside the module) sees a storage of size 0 in between, and an operator reading it there reads
freed memory: both real ranks die (SIGSEGV, or "setStorage: out of bounds for storage of size
0"), or read what the allocator put there.

The stand-in (:mod:`fsdp_unsharded`, :mod:`fsdp_hold`) does the same to its leaf: :func:`free`
at each reshard resizes the leaf's fake storage to 0 (so ``untyped_storage().size()``,
``nbytes()`` answer what the real run's do), :func:`alloc` at each unshard gives it its size
back (fake tensors hold no values: the trace's value of the leaf is the gather's, as before),
and while the step runs :func:`freed_reads_refused` refuses any operator the trace's
``FakeTensorMode`` dispatches with an argument over freed memory (meta kernels read nothing,
so the fake run does not fail by itself). Before, the leaf kept its storage: r48a_03
(``untyped_storage().size() == 0`` tells the parallel run) was EQUIVALENT, r48a_08 and
r48c_06 (reads of a kept reference: both real ranks die) were EQUIVALENT.

A ``fully_shard`` pipeline stage's step leaves (:mod:`pp_leaves`) follow the same points inside
``schedule.step``: a block that reshards after its forward frees them at its post-forward
(outside the backward) and allocates them at its next forward or its pre-backward (round 49c,
R49c-1 / -2 / -3: a reference kept from a block's forward, read or size-checked in a later
block's hook or the last stage's ``loss_fn``, was EQUIVALENT); every leaf is freed after the
step's reduction (``perform_reduce_grad``; round 49b, R49b-1 / R49b-2: the same after
``schedule.step``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils._pytree import tree_leaves

from spec_lang.errors import PlanError
from spec_lang.torch_frontend.storage_writes import on_dispatch, storage_of, written

__all__ = ["free", "alloc", "is_freed", "allocated", "restore_all", "freed_reads_refused"]

_FREED: dict[Any, tuple[str, int, Any]] = {}
"""The storage of each freed leaf (a weak reference, :func:`storage_of`) -> (what it is, for
the message; its size in bytes before; the storage, to give the size back)."""


def _local(t: Any) -> Any:
    return getattr(t, "_local_tensor", t)


def free(t: Any, what: str) -> None:
    """FSDP2's ``free_storage`` of leaf ``t`` (a tensor, or a DTensor's local tensor): its
    storage resized to 0 bytes, remembered with ``what`` (``"FSDP2's unsharded parameter of
    w1.weight"``) for :func:`freed_reads_refused`'s message. Freeing twice is freeing once; a
    tensor that is not a fake tensor (the capture's are) is left as it is."""
    from torch._subclasses.fake_tensor import is_fake  # noqa: PLC0415

    local = _local(t)
    ref = storage_of(local)
    if ref in _FREED or not is_fake(local):     # real memory is never freed here
        return
    st = local.untyped_storage()
    _FREED[ref] = (what, st.nbytes(), st)
    st.resize_(0)


def alloc(t: Any) -> None:
    """FSDP2's ``alloc_storage`` of leaf ``t`` at an unshard: its storage given its size back
    (nothing when it was not freed)."""
    got = _FREED.pop(storage_of(_local(t)), None)
    if got is not None:
        got[2].resize_(got[1])


def is_freed(t: Any) -> bool:
    """Whether ``t``'s memory is freed now (a reshard since its last unshard)."""
    return storage_of(_local(t)) in _FREED


def restore_all() -> None:
    """Every freed storage given its size back and forgotten: the end of the step (what the
    capture reads after it is not a read of the real run's memory) or a step stopped
    inside."""
    for _, nbytes, st in _FREED.values():
        st.resize_(nbytes)
    _FREED.clear()


_METADATA = frozenset({"sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "size",
                       "stride", "numel", "dim", "storage_offset", "is_contiguous",
                       "is_strides_like_format", "is_non_overlapping_and_dense"})
"""Operators that answer a tensor's metadata, never its memory (as ``prim.device``), asked
also from C++ code that cannot raise (a refusal there aborts the process)."""


def _reads_memory(func: Any) -> bool:
    """Whether operator ``func`` may read its tensor arguments' memory: any but the ``prim``
    namespace's (``prim.device``, ``prim.layout``) and :data:`_METADATA`. A view counts (a
    view of freed memory is refused too, stricter than torch, whose ``as_strided`` checks the
    storage's bounds only)."""
    return getattr(func, "namespace", "") != "prim" and \
        getattr(func, "_opname", "") not in _METADATA


def _freed_arg(args: Any, kwargs: Any) -> str | None:
    for t in tree_leaves((args, kwargs)):
        if isinstance(t, torch.Tensor):
            try:
                got = _FREED.get(storage_of(t))
            except (RuntimeError, NotImplementedError):     # a tensor without a storage
                continue
            if got is not None:
                return got[0]
    return None


@contextlib.contextmanager
def allocated(t: Any) -> Iterator[None]:
    """Within the block, ``t``'s memory counts as allocated: for shardproof's own reads of a
    leaf (``fsdp_unsharded.left_over`` asks ``get_gradient_edge``, which takes a view), which
    are not the step's. No code of the train file runs inside."""
    got = _FREED.pop(storage_of(_local(t)), None)
    try:
        yield
    finally:
        if got is not None:
            _FREED[storage_of(_local(t))] = got


@contextlib.contextmanager
def freed_reads_refused(path: str) -> Iterator[None]:
    """Within the block (the plan's traced ``train_step``, inside ``make_fx``), an operator the
    trace's ``FakeTensorMode`` dispatches with a tensor argument over freed memory (a freed
    leaf or a view of it; in a tensor hook or a ``Function.backward`` too) is refused,
    naming the user's line in ``path``. The mode's ``dispatch`` is restored after the block;
    nothing happens outside a fake tensor trace.

    Raises:
        PlanError: such an operator (exit 3): for real it reads freed memory (R48a-2); again
            at the end of the block when the train file caught it."""
    from spec_lang.torch_frontend.thread_guard import user_line  # noqa: PLC0415

    found: list[str] = []

    def seen(func: Any, args: tuple, kwargs: dict) -> None:
        what = _freed_arg(args, kwargs) if _FREED and _reads_memory(func) else None
        if what is not None:
            verb = "writes into" if written(func, args, kwargs) else "reads"
            found.append(f"{path}:{user_line(path)}: {func} {verb} {what} after its unit "
                         "resharded, which frees that memory (torch 2.13 FSDPParam."
                         "free_unsharded_param): for real the step uses freed memory (a "
                         "crash, or what the allocator put there; R48a-2). Read the "
                         "parameter through its module inside the unit's forward, and keep "
                         "no reference to it (or a view of it) past the forward")
            raise PlanError(found[-1])

    try:
        with on_dispatch(seen):
            yield
    finally:
        restore_all()
    if found:       # refused even when caught: also where caught.py does not look (a try in
        # a module the train file imports, code it exec's), round 49e
        raise PlanError(found[0])
