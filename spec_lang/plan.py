"""The plan: the SPMD program every rank runs, over a named mesh.

A :class:`Plan` holds

* ``mesh``: :class:`~spec_lang.mesh.Mesh` (``Mesh(dp=2, tp=4)``);
* ``placements``: spec input name (parameter or data) -> ``{axis: Shard(d) | Replicate() |
  Partial(op)}``; a missing name or axis is ``Replicate()``. Optimizer state follows its
  parameter's placement;
* ``forward``: the per-rank, per-micro-batch program ``forward(params, data) -> Tensor | Loss``
  over *local* tensors (each is its spec input through its placement: its lineage), written
  with the spec's ops plus collectives and regions;
* ``reduce_grads``: the explicit gradient synchronisation ``(name, grad) -> grad``, run after
  micro-batch accumulation and before the optimizer (scale factors and groups are written
  here, never inferred);
* ``microbatches``: :func:`microbatches` ``(K, dim)`` for gradient accumulation: data are sharded
  over the pseudo-axis ``mb`` along ``dim`` (innermost), the forward is traced once, and the
  accumulated gradient (and reported loss) is ``ALL_REDUCE(., "mb", "sum")``;
* ``optimizer``: defaults to the spec's; it runs on the local shards.

The iteration's outputs and their placements: each updated parameter, its gradient
(``grad:name``, as handed to the optimizer) and its optimizer state keep the parameter's
placement; ``loss`` (the reported loss) is replicated.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spec_lang.dims import Dim, DimLike
from spec_lang.errors import PlanError
from spec_lang.mesh import Mesh
from spec_lang.placement import Placement
from spec_lang.tensor import Tensor, user_site

__all__ = ["Plan", "Loss", "Microbatches", "microbatches"]


@dataclass(frozen=True)
class Loss:
    """What a plan's forward returns when the backward seed differs from the reported loss.

    Attributes:
        backward: the per-rank scalar that is differentiated (the seed's primal).
        report: the per-rank scalar the plan reports as the loss (must equal the spec loss
            after micro-batch accumulation).
    """

    backward: Tensor
    report: Tensor


@dataclass(frozen=True)
class Microbatches:
    """Gradient accumulation over ``k`` micro-batches that split data dim ``dim``."""

    k: int
    dim: str


def microbatches(k: int, dim: DimLike) -> Microbatches:
    """``K`` micro-batches along data dim ``dim`` (usually the batch dim ``B``).

    Raises:
        PlanError: ``k`` is not a positive integer.
    """
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise PlanError(f"{user_site(2)}: microbatches({k!r}): a positive integer")
    return Microbatches(k, dim.name if isinstance(dim, Dim) else str(dim))


GradReducer = Callable[[str, Tensor], Tensor]


@dataclass(frozen=True, kw_only=True)
class Plan:
    """An SPMD plan (see the module docstring)."""

    mesh: Mesh
    forward: Callable[..., Any]
    placements: Mapping[str, Mapping[Any, Placement]] = field(default_factory=dict)
    reduce_grads: GradReducer | Mapping[str, GradReducer] | None = None
    microbatches: Microbatches | None = None
    optimizer: Any = None
    assumptions: tuple[str, ...] = ()
    site: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.site:
            object.__setattr__(self, "site", user_site(3))
        if not isinstance(self.mesh, Mesh):
            raise PlanError(f"{self.site}: mesh must be a Mesh(...), got {self.mesh!r}")
        if not callable(self.forward):
            raise PlanError(f"{self.site}: forward must be a function (params, data) -> loss")
        pl = {k: {str(a): p for a, p in v.items()} for k, v in self.placements.items()}
        object.__setattr__(self, "placements", pl)

    @property
    def axes(self) -> dict[str, int]:
        """Mesh axes in order, plus ``mb`` when micro-batching."""
        out = dict(self.mesh.sizes)
        if self.microbatches is not None:
            out["mb"] = self.microbatches.k
        return out

    def reducer(self, name: str) -> GradReducer | None:
        if self.reduce_grads is None:
            return None
        if callable(self.reduce_grads):
            return self.reduce_grads
        return self.reduce_grads.get(name)
