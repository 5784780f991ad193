"""FSDP2's unsharded leaf parameters of a ``fully_shard`` pipeline stage, for one
``schedule.step`` (issue 11; ``docs/torch.md``, "Pipelining", step 7).

What torch 2.13 does for real: from a stage's first micro-batch to ``perform_reduce_grad`` every
FSDP parameter has one unsharded ``nn.Parameter`` (a leaf: the all-gather of the shard) that
the unit's forwards, its backwards (``set_reshard_after_backward(False)``) and activation
checkpointing's recomputation use; autograd accumulates each micro-batch's *local* gradient
into its ``.grad`` (``set_requires_gradient_sync(False)``), and ``perform_reduce_grad`` reduces
that sum once (reduce-scatter over the shard axis, all-reduce over the replicate axes, the
divide factor) into the sharded parameter's ``.grad``, then frees the unsharded gradient.

:class:`StepLeaves` is that state for the capture: while it is active (:data:`ACTIVE`),
:func:`dataparallel.unit_view` asks :func:`leaf_for` first, which makes (at the unit's first
forward of the step) or returns the step's one leaf of a stage parameter;
:meth:`StepLeaves.reduce` is the reduction. So what user code reads inside the step (``.grad``,
``is_leaf``, ``grad_fn``, the ``AccumulateGrad`` node, identity across micro-batches) is what
the real run holds, wherever the code runs (a forward, a tensor hook in the autograd engine:
round 42b, R42b-1). Source: rounds 41e (R41e-1), 42a (R42a-1, -3), 42b (R42b-1).

Written in place between the leaf's gather and the reduction (the stored shard, or the leaf
itself): refused (exit 3), as :func:`recompute.gathered_then_written` for the per-backward
gather: FSDP2 all-gathers again for the next forward / backward when it reshards, so the real
run sees a value the single leaf does not.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.distributed.tensor import DTensor

from spec_lang.errors import PlanError
from spec_lang.torch_frontend.fsdp_freed import alloc, free
from spec_lang.torch_frontend.fsdp_unsharded import gathered, reduced
from spec_lang.torch_frontend.recompute import param_versions
from spec_lang.torch_frontend.storage_writes import on_writes, storage_of

__all__ = ["StepLeaves", "ACTIVE", "leaf_for", "Leaf", "keeps_unsharded", "pre_backward_hooks",
           "manages"]


@dataclass
class Leaf:
    """One stage parameter's unsharded leaf for the step: ``leaf`` (what the modules hold),
    ``unit`` (its ``DPUnit``), ``stored`` (the sharded parameter the optimizer holds), ``orig``
    (the parameter before sharding: its TP placements), ``dim`` (the shard dim, FSDP2),
    ``versions`` (of ``stored`` and ``leaf`` when it was made)."""

    leaf: Any
    unit: Any
    stored: Any
    orig: Any
    dim: int
    versions: tuple[int, ...]
    storages: tuple[Any, ...] = ()


ACTIVE: list[StepLeaves] = []
"""The leaf steps of the stand-in stages whose ``schedule.step`` runs now (one per stage)."""


def leaf_for(u: Any, stored: Any, orig: Any) -> Any | None:
    """The step's unsharded leaf of ``stored`` (a parameter of unit ``u``) when an active
    :class:`StepLeaves` manages it (made now at its first request), else None (the unit's
    per-forward view, :func:`dataparallel.unit_view`)."""
    for s in ACTIVE:
        if id(stored) in s.params:
            return s.leaf(u, stored, orig)
    return None


def manages(stored: Any) -> bool:
    """Whether an active :class:`StepLeaves` holds the stored parameter ``stored``."""
    return any(id(stored) in s.params for s in ACTIVE)


def keeps_unsharded(u: Any) -> bool:
    """Whether unit ``u``'s modules keep the step's leaves after its forward (FSDP2 does not
    reshard: ``reshard_after_forward=False`` or 1, or left None on the root, the stage module:
    torch 2.13 ``FSDPState._lazy_init``; :func:`fsdp_hold.reshards_after_forward`); otherwise
    its forward's post-hook registers the stored parameters back until the unit's backward
    reaches it (:func:`pre_backward_hooks`) or its next forward."""
    if not ACTIVE:
        return False
    from spec_lang.torch_frontend.fsdp_hold import reshards_after_forward  # noqa: PLC0415

    return any(not reshards_after_forward(u, u.module is s.module) for s in ACTIVE if s.leaves)


def pre_backward_hooks(u: Any, out: Any) -> None:
    """FSDP2's pre-backward hook of a unit that resharded after its forward (torch 2.13
    ``FSDPState._register_pre_backward_hook``: a hook on every output tensor that requires
    grad): when the backward reaches unit ``u``'s output, the step's leaves of ``u`` are
    registered in its modules again (unit by unit, as the backward reaches each: round 43a,
    R43a-2, a hook of a later unit read an earlier unit's parameter registered too early).
    Called at ``u``'s post-forward, which reshards it outside the backward: its leaves' memory
    is freed here until then (:meth:`StepLeaves.reshard`). Nothing when no active
    :class:`StepLeaves` holds leaves of ``u``."""
    from torch.utils._pytree import tree_leaves  # noqa: PLC0415

    steps = next((s for s in ACTIVE if any(x.unit is u for x in s.leaves.values())), None)
    if steps is None:
        return
    if torch._C._current_graph_task_id() == -1:  # noqa: SLF001 -- FSDP2's not is_bw()
        steps.reshard(u)    # the post-forward reshard frees them (R49c-1); not in a
        # recomputation inside the backward, where FSDP2 does not reshard (R44c-8)
    for t in tree_leaves(out):
        if isinstance(t, torch.Tensor) and t.requires_grad:
            t.register_hook(lambda g, u=u: steps.register(u))


def _fsdp_state(u: Any) -> bool:
    """Unit ``u`` is an FSDP2 state (``fully_shard`` or the FSDP-based ``replicate``):
    :attr:`dataparallel.DPUnit.fsdp_state` (a unit test's stand-in unit: ``kind``)."""
    return bool(getattr(u, "fsdp_state", u.kind == "fsdp"))


def _shard_dim(u: Any, stored: Any) -> int:
    """The dim FSDP2 shards ``stored`` along over ``u``'s shard axis (0 for a plain tensor:
    the unit tests' stand-in)."""
    if not isinstance(stored, DTensor):
        return 0
    return next(q.dim for a, q in zip(stored.device_mesh.mesh_dim_names, stored.placements)
                if a == u.shard_axis)


def _shard_group(u: Any) -> Any:
    """The process group FSDP2 shards over (None: the FSDP-based ``replicate``, a copy)."""
    return u.group(u.shard_axis) if u.kind == "fsdp" else None


def _at(u: Any) -> str:
    """`` (fully_shard at FILE:LINE)`` for unit ``u``'s call, or nothing."""
    site = getattr(u, "settings", {}).get("_site", "")
    return f" (fully_shard at {site})" if site else ""


def _versions(stored: Any, leaf: Any) -> tuple[int, ...]:
    return param_versions(stored) + param_versions(leaf)


def _storages(stored: Any, leaf: Any) -> tuple[Any, ...]:
    return (storage_of(stored), storage_of(leaf))


class StepLeaves:
    """The unsharded leaves of one stand-in stage (``module``: the stage module) for one
    ``schedule.step``; ``refuse(what)`` raises with the user's line."""

    def __init__(self, module: Any, refuse: Callable[[str], None]) -> None:
        self.module, self.refuse = module, refuse
        self.params = {id(p) for p in module.parameters()}
        self.leaves: dict[int, Leaf] = {}
        self.guarded = {storage_of(p) for p in module.parameters()}   # + every leaf's

    def leaf(self, u: Any, stored: Any, orig: Any) -> Any:
        """``stored``'s leaf: made at the first request (the all-gather of the shard as
        :class:`dataparallel.GatherShard`'s forward does it, detached, requiring grad; a
        DTensor with ``orig``'s TP placements when ``orig`` is one), the same object later.

        Raises:
            PlanError: (through ``refuse``) the stored shard or the leaf written in place
                since the leaf was made."""
        got = self.leaves.get(id(stored))
        if got is not None:
            self._unwritten(got)
            alloc(got.leaf)     # gathered again after a reshard (fsdp_freed, R49c-1)
            return self._follows(got)
        dim = _shard_dim(u, stored) if _fsdp_state(u) and u.kind == "fsdp" else 0
        if not _fsdp_state(u):          # composable DDP replicate: the parameter itself
            full = stored.detach()
        else:       # FSDP2, or the FSDP-based replicate (a copy: R43d-1 / -7)
            full = gathered(u, stored, orig, dim, _shard_group(u))
        leaf = full.requires_grad_(stored.requires_grad)     # FSDP2's (R43b-1, R43b-2)
        self.leaves[id(stored)] = Leaf(leaf, u, stored, orig, dim, _versions(stored, leaf),
                                       _storages(stored, leaf))
        self.guarded.add(storage_of(leaf))
        return leaf

    def _follows(self, x: Leaf) -> Any:
        """``x.leaf``, made with the stored parameter's ``requires_grad`` (FSDP2 makes its
        unsharded parameter so: R43b-1 / R43b-2, a parameter frozen for the step got a leaf
        gradient the optimizer applied). A change of the stored parameter's ``requires_grad``
        inside the step is refused: FSDP2 copies it only when it gathers again
        (``FSDPParam.to_unsharded``), not into a root's unsharded parameter kept between
        micro-batches (round 43c, R43c-1: a false accept when it was followed at every use).

        Raises:
            PlanError: (through ``refuse``) ``requires_grad`` changed since the leaf was made."""
        if x.leaf.requires_grad != x.stored.requires_grad:
            self.refuse(f"requires_grad of a parameter of a pipeline stage wrapped by "
                        f"fully_shard{_at(x.unit)} changed inside schedule.step: "
                        "FSDP2 copies it to its unsharded parameter only when it all-gathers "
                        "again, which prove --torch does not model (docs/torch.md, "
                        "'Pipelining', step 7); freeze or unfreeze parameters outside "
                        "schedule.step")
        return x.leaf

    def _unwritten(self, got: Leaf) -> None:
        if _versions(got.stored, got.leaf) != got.versions \
                or _storages(got.stored, got.leaf) != got.storages:   # ``.data = t`` (R43a-1)
            self.refuse(f"a parameter of a pipeline stage wrapped by fully_shard"
                        f"{_at(got.unit)} is written in place inside schedule.step: FSDP2 "
                        "all-gathers it again for later forwards and backwards, which prove "
                        "--torch does not model (docs/torch.md, 'Pipelining', step 7); change "
                        "parameters only in the optimizer step")

    @contextlib.contextmanager
    def writes_refused(self) -> Iterator[None]:
        """Within the block (the stand-in stage's ``schedule.step``, inside ``make_fx``), the
        trace's ``FakeTensorMode`` refuses (``refuse``) an operator that writes into the memory
        of a stage parameter or of a leaf, wherever it runs: in a tensor hook or a
        ``Function.backward`` the autograd engine calls (no torch function mode is active
        there) and through ``.data`` (no version counter bumps). Round 43a, R43a-1: a hook
        zeroed a stored shard through ``.data``; FSDP2 all-gathers the shard again for later
        micro-batches (and after torch's metadata inference) and reads the write, the step's
        one leaf did not: a wrong step was EQUIVALENT."""
        def refuse_write(func: Any, t: Any) -> None:
            if storage_of(t) in self.guarded:
                self.refuse(f"{func} writes into a parameter of a pipeline stage wrapped "
                            "by fully_shard inside schedule.step (through .data, a hook "
                            "or a view): FSDP2 all-gathers it again for later forwards "
                            "and backwards, which prove --torch does not model "
                            "(docs/torch.md, 'Pipelining', step 7); change parameters "
                            "only in the optimizer step")

        with on_writes(refuse_write):
            yield

    def register(self, unit: Any = None) -> None:
        """Put the leaves of ``unit`` (every leaf when None) in the modules that hold their
        stored parameters (FSDP2's pre-backward unshard; it keeps them registered from a
        unit's backward to the reduction: ``set_reshard_after_backward(False)``)."""
        mine = [x for x in self.leaves.values() if unit is None or x.unit is unit]
        for x in mine:
            alloc(x.leaf)       # FSDP2's pre-backward all-gather (fsdp_freed, R49c-1)
        self._swap({id(x.stored): self._follows(x) for x in mine})

    def reshard(self, unit: Any) -> None:
        """FSDP2's post-forward reshard of ``unit`` (a block that reshards after its forward,
        :func:`keeps_unsharded` False): its step leaves' memory freed until its next forward
        or its pre-backward (:func:`fsdp_freed.free`; round 49c, R49c-1 / -2 / -3: a reference
        kept from the block's forward, read or size-checked in a later block's hook or the
        last stage's ``loss_fn`` inside ``schedule.step``, was EQUIVALENT where for real the
        memory is freed)."""
        self._free([x for x in self.leaves.values() if x.unit is unit])

    def _free(self, leaves: list[Leaf]) -> None:
        names = {id(p): n for n, p in self.module.named_parameters()}
        for x in leaves:
            name = names.get(id(x.stored)) or names.get(id(x.leaf), "a stage parameter")
            free(x.leaf, f"FSDP2's unsharded parameter of {name}{_at(x.unit)}")

    def _swap(self, to: dict[int, Any]) -> None:
        for mod in self.module.modules():
            for attr, p in list(mod._parameters.items()):  # noqa: SLF001
                if p is not None and id(p) in to:
                    mod._parameters[attr] = to[id(p)]  # noqa: SLF001

    def reduce(self) -> None:
        """FSDP2's ``post_backward`` with the gradient sync on: for every leaf with a gradient,
        the reduction :class:`dataparallel.GatherShard`'s backward does (reduce-scatter over
        the shard axis, all-reduce over the replicate axes, ``/ factor``; ``replicate``: the
        all-reduce over its mesh) of ``leaf.grad``, accumulated into the stored parameter's
        ``.grad`` (in place when there is one, as ``AccumulateGrad``); then the leaf's
        gradient is freed, the stored parameters are registered back and the leaves' memory
        is freed (:func:`fsdp_freed.free`: FSDP2 reshards after the reduction, so a kept
        reference read after ``schedule.step`` reads freed memory; round 49b, R49b-1 / R49b-2:
        such a step was EQUIVALENT, both real ranks die or tell the runs apart).

        Raises:
            PlanError: (through ``refuse``) a parameter written in place in the step."""
        import torch.distributed._functional_collectives as funcol  # noqa: PLC0415

        for x in self.leaves.values():
            self._unwritten(x)
        self._swap({id(x.leaf): x.stored for x in self.leaves.values()})
        for x in self.leaves.values():
            g, u = x.leaf.grad, x.unit
            x.leaf.grad = None
            if g is None:
                continue
            with torch.no_grad():
                if not _fsdp_state(u):
                    for gr in tuple(u.group(a) for a in u.mesh.mesh_dim_names):
                        g = funcol.wait_tensor(funcol.all_reduce(g, "sum", gr))
                    g = g / u.factor()
                else:
                    g = reduced(u, x.stored, x.orig, x.dim, _shard_group(u), g) / u.factor()
                    if isinstance(x.stored, DTensor):
                        g = DTensor.from_local(g, x.stored.device_mesh, x.stored.placements,
                                               run_check=False, shape=x.stored.shape,
                                               stride=x.stored.stride())
                if x.stored.grad is None:
                    x.stored.grad = g
                else:
                    x.stored.grad.add_(g)
        self._free(list(self.leaves.values()))  # the reshard after it (R49b-1 / -2)
        self.leaves.clear()

