"""Explicit ownership of a sharded optimizer step: which rank updates which slice of a parameter.

A distributed optimizer (ZeRO-1/2, Megatron's ``DistributedOptimizer``, DeepSpeed's flat
partitions, ``LayerWiseDistributedOptimizer``) cuts each parameter into row blocks and lets one
rank of a group step each block; an all-gather then hands every rank the owners' blocks. The
correctness condition (CASES2.md B45) is on the **parameter after the step**: every element is
updated exactly once, by its owner, from the fully reduced gradient. :class:`Ownership` states
the map as plan data, ``Plan(optimizer_owners={name: Ownership(...)})``:

* ``owners[j]`` is the rank (coordinate on ``axis``) that steps block ``j`` of ``len(owners)``
  equal blocks of the parameter along ``dim``, or ``None`` when no rank does (a layout sized for
  more shards than the group has: the trailing blocks are never written);
* on every rank the optimizer runs on the rank's *full-rows* tensors (the parameter in its own
  placement, the gradient ``reduce_grads`` returns, state in the parameter's placement), as
  DeepSpeed's ``get_flat_partition`` does before keeping its slice; for an elementwise optimizer
  this is the same as stepping the slice, for Muon (a whole-matrix map) it is the point;
* the parameter (and each state tensor, and the gradient goal) after the step is, block by
  block, the owner's value (``BROADCAST`` from the owner: what the all-gather delivers) or, for a
  block without an owner, the old value. When the owners are exactly ranks ``0 .. n-1`` of an
  ``n``-rank axis in order, this is ``ALL_GATHER(SHARD(x, dim, axis), axis, dim)`` (the same
  value; the form the rewriting proves when every rank holds the same ``x``).

"Exactly once" holds by construction (one entry per block); totality is checked by the proof:
a block with no owner keeps its old value and the parameter goal is refuted with values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from spec_lang.collectives import all_gather, broadcast
from spec_lang.dims import DimLike, dim_name
from spec_lang.ops import chunk, concat
from spec_lang.tensor import Tensor, fail, user_site
from spec_lang.term import DimSpec, Op, term

__all__ = ["Ownership"]


@dataclass(frozen=True)
class Ownership:
    """Row blocks of one parameter and the rank that steps each (module docstring).

    Attributes:
        axis: the mesh axis of the optimizer's group.
        dim: the parameter dim cut into ``len(owners)`` equal blocks.
        owners: per block, the owning coordinate on ``axis`` or ``None``.
        site: the plan line that built it.
    """

    axis: str
    dim: str
    owners: tuple[int | None, ...]
    site: str = ""

    def __init__(self, axis: Any, dim: DimLike, owners: Sequence[int | None]):
        site = user_site(2)
        own = tuple(owners)
        if not own or not all(o is None or (isinstance(o, int) and not isinstance(o, bool)
                                            and o >= 0) for o in own):
            raise fail(f"Ownership owners must be a non-empty list of rank coordinates (ints "
                       f">= 0) or None, got {list(owners)!r}", site=site)
        object.__setattr__(self, "axis", str(axis))
        object.__setattr__(self, "dim", dim_name(dim))
        object.__setattr__(self, "owners", own)
        object.__setattr__(self, "site", site)

    @property
    def unowned(self) -> list[int]:
        """The blocks no rank steps."""
        return [j for j, o in enumerate(self.owners) if o is None]

    def describe(self) -> str:
        """``"dim F over dp: blocks -> ranks [0, 1, -, -]"``."""
        own = ", ".join("-" if o is None else str(o) for o in self.owners)
        return f"dim {self.dim} over {self.axis}: blocks -> ranks [{own}]"

    def check(self, name: str, local: Tensor, mesh: dict[str, int], site: str) -> None:
        """Raise a PlanError naming ``site`` if the map does not fit ``name``'s local tensor."""
        n = mesh.get(self.axis)
        if n is None:
            raise fail(f"optimizer_owners[{name!r}] is over axis {self.axis!r}, which is not in "
                       f"the mesh {mesh}", site=site)
        bad = [o for o in self.owners if o is not None and o >= n]
        if bad:
            raise fail(f"optimizer_owners[{name!r}] names ranks {bad} of {self.axis!r}, which "
                       f"has {n}; a block without an owner is None", site=site)
        if self.dim not in local.dims:
            raise fail(f"optimizer_owners[{name!r}] cuts dim {self.dim}, which {local.describe()} "
                       "lacks", site=site)

    def regular(self, n: int) -> bool:
        """Block ``r`` is owned by rank ``r`` of an ``n``-rank axis: a ``Shard`` over it."""
        return self.owners == tuple(range(n))

    def assemble(self, new: Tensor, old: Tensor, n: int) -> Tensor:
        """The value every rank holds after the owners' all-gather: ``new`` (this rank's
        result, full rows) on owned blocks as the owner computed it, ``old`` elsewhere."""
        if self.regular(n):
            dims = tuple(DimSpec(s.name, s.shards + (self.axis,)) if s.name == self.dim else s
                         for s in new.term.dims)
            own = Tensor(term(Op.SHARD, (new.term,), (self.dim, self.axis), dims), new.site,
                         new.name)
            return all_gather(own, self.axis, self.dim)
        k = len(self.owners)
        if k == 1:
            o = self.owners[0]
            return old if o is None else broadcast(new, self.axis, o)
        blocks = []
        for j, o in enumerate(self.owners):
            if o is None:
                blocks.append(chunk(old, self.dim, k, j))
            else:
                blocks.append(broadcast(chunk(new, self.dim, k, j), self.axis, o))
        return concat(blocks, self.dim)
