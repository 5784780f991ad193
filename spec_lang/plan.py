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
* ``optimizer_init``: :class:`~spec_lang.optim.InitStep` s run before the iteration
  (``optimizer.step()`` with zero gradients: initialisation code is part of the plan, B46);
  the forward then reads the parameters they leave.
* ``optimizer_owners`` (explicit ownership, :class:`~spec_lang.ownership.Ownership`): name ->
  which rank steps which row block; the optimizer runs on each rank's full-rows tensors and the
  owners' blocks are all-gathered (a block without an owner keeps its old value, B45 / B48).
* ``optimizer_placements`` (ZeRO): name -> placement of the optimizer step (gradient handed to
  the optimizer, optimizer state); default the parameter's. Then ``reduce_grads`` must produce
  that type (e.g. ``reduce_scatter`` over dp) and ``gather_params(name, new_shard)`` rebuilds the
  updated parameter in its own placement (e.g. ``all_gather`` over dp).
* ``grad_norm_sq``: when the spec clips gradients, the plan's global squared norm from the
  local gradients ``{name: grad}`` (which axes to all-reduce depends on each placement: plan
  data). Clipping then uses the spec's ``clip_grad_norm`` (or the plan's ``clip_grad_norm``).
* ``schedule``: a :class:`~spec_lang.pipeline.Pipeline` (stages, send/recv, a per-stage event
  order) or an :class:`~spec_lang.pipeline.Accumulation` (one stage's event order): the
  accumulated gradient is then the loop-carried buffer those events compute
  (:mod:`spec_lang.schedules`) instead of the plain ``ALL_REDUCE(g, "mb", "sum")``.

The iteration's outputs and their placements: each updated parameter, its gradient
(``grad:name``, as handed to the optimizer, before clipping) and its optimizer state; the
parameter keeps its placement, gradient and state have the optimizer placement; ``loss`` (the
reported loss) and ``grad_norm`` (with clipping) are replicated.
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
    """Gradient accumulation over ``k`` micro-batches that split data dim ``dim``.

    ``accum_dtype``: dtype of the gradient accumulation buffer (``None``: the gradients'
    own, fp32); read by the precision lint only (a cast is the identity over the reals)."""

    k: int
    dim: str
    accum_dtype: str | None = None
    site: str = field(default="", compare=False)


def microbatches(k: int, dim: DimLike = "B", *, accum_dtype: str | None = None) -> Microbatches:
    """``K`` micro-batches along data dim ``dim`` (default the batch dim ``B``);
    ``accum_dtype`` is the accumulation buffer's dtype (``"bf16"``: a precision-lint finding).

    Raises:
        PlanError: ``k`` is not a positive integer; ``accum_dtype`` is not a known dtype.
    """
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise PlanError(f"{user_site(2)}: microbatches({k!r}): a positive integer")
    if accum_dtype is not None:
        from spec_lang.ops import FLOAT_DTYPES
        if not isinstance(accum_dtype, str) or \
                accum_dtype.lower().removeprefix("torch.") not in FLOAT_DTYPES:
            raise PlanError(f"{user_site(2)}: microbatches(accum_dtype={accum_dtype!r}) is not a "
                            f"known floating dtype; valid: {', '.join(FLOAT_DTYPES)}")
    return Microbatches(k, dim.name if isinstance(dim, Dim) else str(dim),
                        None if accum_dtype is None else str(accum_dtype), user_site(2))


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
    optimizer_placements: Mapping[str, Mapping[Any, Placement]] = field(default_factory=dict)
    optimizer_init: tuple[Any, ...] = ()
    optimizer_owners: Mapping[str, Any] = field(default_factory=dict)
    gather_params: GradReducer | Mapping[str, GradReducer] | None = None
    grad_norm_sq: Callable[[Mapping[str, Tensor]], Tensor] | None = None
    clip_grad_norm: Any = None
    assumptions: tuple[str, ...] = ()
    schedule: Any = None
    site: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.site:
            object.__setattr__(self, "site", user_site(3))
        if not isinstance(self.mesh, Mesh):
            raise PlanError(f"{self.site}: mesh must be a Mesh(...), got {self.mesh!r}")
        if not callable(self.forward):
            raise PlanError(f"{self.site}: forward must be a function (params, data) -> loss")
        if self.clip_grad_norm is not None:
            from spec_lang.optim import max_norm_value
            max_norm_value(self.clip_grad_norm, self.site, PlanError)
        for fld in ("placements", "optimizer_placements"):
            pl = {k: {str(a): p for a, p in v.items()} for k, v in getattr(self, fld).items()}
            object.__setattr__(self, fld, pl)
        from spec_lang.optim import InitStep
        from spec_lang.ownership import Ownership
        init = tuple(self.optimizer_init)
        if not all(isinstance(s, InitStep) for s in init):
            raise PlanError(f"{self.site}: optimizer_init must be a list of InitStep(...), got "
                            f"{list(init)!r}")
        object.__setattr__(self, "optimizer_init", init)
        owners = dict(self.optimizer_owners)
        bad = [k for k, v in owners.items() if not isinstance(v, Ownership)]
        if bad:
            raise PlanError(f"{self.site}: optimizer_owners[{bad[0]!r}] must be an Ownership(...)")
        both = sorted(set(owners) & set(self.optimizer_placements))
        if both:
            raise PlanError(f"{self.site}: {both} have both optimizer_owners and "
                            "optimizer_placements; give one (ownership runs the optimizer on the "
                            "parameter's own placement)")
        object.__setattr__(self, "optimizer_owners", owners)

    @property
    def axes(self) -> dict[str, int]:
        """Mesh axes in order, plus ``mb`` when micro-batching."""
        out = dict(self.mesh.sizes)
        if self.microbatches is not None:
            out["mb"] = self.microbatches.k
        return out

    def reducer(self, name: str) -> GradReducer | None:
        """The gradient synchronisation of parameter ``name`` (None: the gradient as is)."""
        return _pick(self.reduce_grads, name)

    def gatherer(self, name: str) -> GradReducer | None:
        """How the updated optimizer shard of ``name`` is rebuilt into the parameter's placement."""
        return _pick(self.gather_params, name)

    def optimizer_placement(self, name: str) -> Mapping[str, Placement]:
        """Where the optimizer step of ``name`` runs (default: the parameter's placement)."""
        return self.optimizer_placements.get(name, self.placements.get(name, {}))


def _pick(f: GradReducer | Mapping[str, GradReducer] | None, name: str) -> GradReducer | None:
    if f is None:
        return None
    if callable(f):
        return f
    return f.get(name)
