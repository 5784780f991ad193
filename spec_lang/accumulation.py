"""Gradient accumulation with an explicit event order, and the gradient buffer as terms.

:func:`lower_buffer` turns a stage's exact buffer (:class:`spec_lang.schedules.Buffer`: chains
of collectives over per-micro-batch coefficients) into terms, shared by
:class:`~spec_lang.pipeline.Pipeline` and :class:`Accumulation` (one stage's accumulation loop
with its own event order). The buffer's value is

    buf = sum over chains C:  C( ALL_REDUCE( RANK_CONST(mb, [c_0, ..., c_{M-1}]) * g, mb ) )

with ``g`` the per-micro-batch local gradient (traced once; it varies over ``mb``), the
coefficients computed by :func:`spec_lang.schedules.buffer_after` and each chain's collectives
applied with the DSL's own ``all_reduce`` / ``reduce_scatter`` (``avg`` writes ``1/|axis|``
explicitly; a chain step's communication dtype is a ``cast`` before it). The buffer's own dtype
(``accum_dtype`` of the schedule, else of ``microbatches``) is a ``cast`` of ``g`` as it enters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spec_lang.autodiff import grad, zeros_like
from spec_lang.collectives import all_reduce, reduce_scatter
from spec_lang.errors import PlanError
from spec_lang.ops import axis_size, cast, const, rank_const, recip
from spec_lang.plan import Loss
from spec_lang.schedules import Buffer, Schedule, buffer_after, parse_op, validate
from spec_lang.spec import Params
from spec_lang.tensor import Tensor, record_site, user_site
from spec_lang.term import Axis, Op, Term, term

__all__ = ["Accumulation", "lower_buffer"]

MB = str(Axis.MB)


def lower_buffer(buf: Buffer, g: Tensor, loop: bool = True, scatter: Any = None) -> Tensor:
    """The buffer's value as a term: ``sum_C C(ALL_REDUCE(RANK_CONST(mb, coeffs_C) * g, mb))``.

    g: the per-micro-batch local gradient (varies over ``mb``). A zero buffer is ``0 * g``
    summed over ``mb`` (a zero of the accumulated type). ``loop=False``: a single micro-batch
    without the ``mb`` axis (no ``microbatches`` in the plan): ``sum_C C(c_C * g)``.
    ``scatter``: the stage's first ``reduce_scatter`` event, if any: the gradient is then the
    sharded part (the chains through a reduce-scatter); contributions left in the unsharded
    buffer never reach the optimizer. A chain step with a communication dtype casts first.
    """
    out: Tensor | None = None
    for chain, coeffs in buf.terms:
        if scatter is not None and not Buffer.sharded_chain(chain):
            continue                      # still in the unsharded buffer: dropped
        if loop:
            x = rank_const(MB, list(coeffs)) * g
            x = Tensor(term(Op.ALL_REDUCE, (x.term,), (MB, "sum"), x.term.dims), g.site, g.name)
        else:
            x = const(coeffs[0]) * g
        for axis, op in chain:
            red, dim, dtype = parse_op(op)
            if dtype is not None:
                x = cast(x, dtype)
            if dim is None:
                x = all_reduce(x, axis, red)
            else:
                x = reduce_scatter(x, axis, dim)
                if red == "avg":
                    x = recip(axis_size(axis)) * x
        out = x if out is None else out + x
    if out is None:
        out = Tensor(zeros_like(g.term), g.site, g.name)
        if loop:
            out = Tensor(term(Op.ALL_REDUCE, (out.term,), (MB, "sum"), out.term.dims), g.site,
                         g.name)
        if scatter is not None:
            out = reduce_scatter(out, scatter.axis, scatter.dim)
    return out


def _first_scatter(events: Sequence[Any]) -> Any:
    """The first ``reduce_scatter`` event of a stage's event order (None if there is none)."""
    return next((e for e in events if e.kind == "reduce_scatter"), None)


def _check_event_axes(stages: Sequence[Sequence[Any]], mesh: Mapping[str, int], site: str
                      ) -> None:
    """Every buffer collective's axis is a mesh axis (PlanError naming the event's line)."""
    for ev in stages:
        for e in ev:
            if e.kind in ("collective", "reduce_scatter") and e.axis not in mesh:
                raise PlanError(f"{e.site or site}: buffer collective over axis {e.axis!r}, "
                                f"which is not in the mesh {dict(mesh)}; add it to the Mesh "
                                "or remove the hook")


def _check_microbatches(plan: Any, m: int, site: str) -> bool:
    """True when the plan loops over the ``mb`` axis; False for one micro-batch without it."""
    k = plan.microbatches.k if plan.microbatches is not None else None
    if k is None and m == 1:
        return False
    if k != m:
        raise PlanError(f"{site}: the schedule runs {m} micro-batches but the plan has "
                        f"microbatches({k}); give Plan(microbatches=microbatches({m}, B))")
    return True


def _buffer_dtype(plan: Any, g: Term, own: tuple[str | None, str] = (None, "")) -> Term:
    """The gradient as it enters the buffer: ``CAST`` to the schedule's ``accum_dtype`` (``own``:
    dtype and site), else ``microbatches(accum_dtype=...)`` (the precision lint's input;
    identity over the reals)."""
    dtype, site = own
    mb = plan.microbatches
    if dtype is None and mb is not None:
        dtype, site = getattr(mb, "accum_dtype", None), mb.site
    if dtype is None:
        return g
    out = term(Op.CAST, (g,), (dtype,), g.dims)
    record_site(out, site)
    return out


def _accum_dtype(dtype: Any, site: str) -> str | None:
    """Validate a schedule's ``accum_dtype`` (PlanError naming ``site``)."""
    from spec_lang.schedules import _dtype
    return _dtype(dtype, site, "accum_dtype")


def _accumulated(rep: Tensor, loop: bool) -> Tensor:
    if not loop:
        return rep
    return Tensor(term(Op.ALL_REDUCE, (rep.term,), (MB, "sum"), rep.term.dims), rep.site, "loss")


def _check_loss(out: Any, site: str) -> tuple[Tensor, Tensor]:
    if isinstance(out, Loss):
        seed, rep = out.backward, out.report
    else:
        seed = rep = out
    for x in (seed, rep):
        if not isinstance(x, Tensor) or x.term.dims:
            raise PlanError(f"{site}: the last stage must return a scalar loss (Tensor or "
                            f"Loss), got {x!r}")
    return seed, rep


@dataclass(frozen=True)
class Accumulation:
    """Gradient accumulation on one stage (no pipeline) with an explicit event order.

    ``events``: the stage's events (``F``/``B`` per micro-batch and buffer hooks), e.g. the
    in-place 1-rank reduction of Megatron-LM #6660. ``buckets``: optional per-parameter event
    orders (name, or prefix ending in ``"."`` -> events) for gradient buckets whose hooks
    differ (expert vs dense gradients, each reduced over its own group); their forward and
    backward order must be the default's. Use as ``Plan(schedule=Accumulation(...))`` with
    ``Plan.forward`` the per-micro-batch forward.

    Raises:
        PlanError: an event order is not executable, or a bucket's F/B order differs.
    """

    events: tuple[Any, ...]
    microbatches: int
    buckets: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    accum_dtype: str | None = None
    site: str = field(default="", compare=False)

    def __init__(self, events: Sequence[Any], microbatches: int,
                 buckets: Mapping[str, Sequence[Any]] | None = None, *,
                 accum_dtype: str | None = None):
        object.__setattr__(self, "site", user_site(2))
        object.__setattr__(self, "accum_dtype", _accum_dtype(accum_dtype, self.site))
        object.__setattr__(self, "events", tuple(events))
        object.__setattr__(self, "microbatches", microbatches)
        object.__setattr__(self, "buckets",
                           tuple((k, tuple(v)) for k, v in (buckets or {}).items()))
        validate(self.schedule, self.site)
        fb = [str(e) for e in self.events if e.kind in ("F", "B")]
        for name, ev in self.buckets:
            validate(Schedule(f"bucket {name}", (ev,), microbatches), self.site)
            if [str(e) for e in ev if e.kind in ("F", "B")] != fb:
                raise PlanError(f"{self.site}: bucket {name!r} runs forwards / backwards in "
                                "another order than the stage; only its buffer hooks may "
                                "differ")

    @property
    def schedule(self) -> Schedule:
        return Schedule("accumulation", (self.events,), self.microbatches)

    def events_of(self, name: str) -> tuple[Any, ...]:
        """The event order of parameter ``name``'s gradient buffer."""
        for k, ev in self.buckets:
            if name == k or (k.endswith(".") and name.startswith(k)):
                return ev
        return self.events

    def trace(self, plan: Any, params: Mapping[str, Tensor], data: Mapping[str, Tensor],
              names: Sequence[str]) -> tuple[Tensor, list[Tensor]]:
        """As :meth:`Pipeline.trace` for one stage running ``plan.forward``."""
        _check_event_axes([self.events] + [ev for _, ev in self.buckets], plan.mesh.sizes,
                          self.site)
        loop = _check_microbatches(plan, self.microbatches, self.site)
        seed, rep = _check_loss(plan.forward(Params(params), data), self.site)
        own = (self.accum_dtype, self.site)
        gs = [_buffer_dtype(plan, g, own) for g in grad(seed.term, [params[k].term for k in names])]
        out = [lower_buffer(buffer_after(self.events_of(k), self.microbatches),
                            Tensor(g, seed.site, f"grad:{k}"), loop,
                            _first_scatter(self.events_of(k)))
               for k, g in zip(names, gs)]
        return _accumulated(rep, loop), out

    def observe(self, param: str, t: Term) -> Term:
        return t

