"""Sharded data parallelism: ZeRO-1/2/3, FSDP, HSDP, FSDP x TP, and flat buffers with offsets.

Every recipe here is data parallelism over a data-parallel mesh whose ranks each see a block of
the global batch; they differ in *what is sharded* over the shard axis (``dp``, or ``dp_shard``
of an HSDP mesh) and therefore in which collectives the gradient goes through:

* **ZeRO-1**: parameters replicated; the gradient is all-reduced, then each rank keeps its
  block (:func:`owned_block`) for its optimizer shard; ``all_gather`` rebuilds the parameter.
* **ZeRO-2**: as ZeRO-1 with a ``reduce_scatter`` instead (same values, less memory).
* **ZeRO-3 / FSDP**: parameters ``Shard(d)`` over dp, all-gathered before use by a region whose
  declared backward is the reduce-scatter (:func:`fsdp_all_gather`); they stay sharded.
* **HSDP**: as FSDP over ``dp_shard``, replicated over ``dp_replicate``; the reduce-scattered
  gradient is then all-reduced over ``dp_replicate``.

Sources: ZeRO (Rajbhandari et al., SC'20, section 5: P_os, P_os+g, P_os+g+p); PyTorch FSDP
(Zhao et al., VLDB'23, section 3: unshard = all-gather, gradient reduce-scatter, hybrid sharding
= reduce-scatter in the shard group then all-reduce in the replicate group); torchtitan's
``dp_replicate`` x ``dp_shard`` mesh (``parallelize_llama``: ``fully_shard`` with
``Shard(0)``).

Loss and scale factors (explicit plan data, as in ``spec_lang.plans.megatron``): the spec is
the masked token mean over the global batch, ``L = S / N``. Each rank's backward seed is
``|data| * S_r / N`` (``N`` the global token count, all-reduced over the micro-batches and every
data axis before the loop) and the gradient is averaged over the data ranks (FSDP's
reduce-scatter / all-reduce with ``ReduceOp.AVG``: sum times ``1/|data|``), so each token weighs
``1/N``. The reported loss is ``all_reduce(S_r) / N``.

**Flat buffers** (:class:`FlatBuffer`): Megatron's distributed optimizer and FSDP1 pack
parameters in a fixed order into one flat buffer; the reduce-scatter gives rank ``r`` of the
axis the index range ``[r L/n, (r+1) L/n)`` (``L`` padded to a multiple of ``n``). Each
parameter's slice is then owned piecewise; the buffer's index map (offsets, owners) is computed
from the real sizes. Reading a slice after the in-place reduce-scatter
(:meth:`FlatBuffer.after_reduce_scatter`) gives the reduced sum on owned pieces and the rank's
own stale, unreduced gradient elsewhere (per-rank 0/1 constants over the axis), so a plan that
steps with a non-owned piece fails its obligation.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spec_lang import ops
from spec_lang.collectives import all_gather, all_reduce, broadcast, reduce_scatter, region
from spec_lang.dims import Dim, DimLike, dim_name
from spec_lang.errors import PlanError
from spec_lang.mesh import Mesh
from spec_lang.models.llama import LlamaModel, ParallelContext
from spec_lang.placement import Placement, Shard
from spec_lang.plan import Loss, Plan, microbatches as _microbatches
from spec_lang.spec import Params
from spec_lang.tensor import Tensor, user_site
from spec_lang.term import Axis

__all__ = [
    "DP", "DP_REPLICATE", "DP_SHARD", "FSDP_ALL_GATHER", "ShardedDPSettings", "ShardedDP",
    "sharded_dp", "zero1", "zero2", "zero3", "fsdp", "hsdp", "fsdp_tp", "owned_block",
    "fsdp_all_gather", "shard_dims", "fsdp_placement", "FlatBuffer",
]

DP, TP, MB = Axis.DP, Axis.TP, Axis.MB
DP_REPLICATE, DP_SHARD = Axis.DP_REPLICATE, Axis.DP_SHARD

FSDP_ALL_GATHER = ("all_gather", "reduce_scatter")
"""FSDP's unshard: all-gather the parameter's shards forward; the declared backward
reduce-scatters (sums over the shard group and keeps this rank's block) the full gradient."""


def fsdp_all_gather(x: Tensor, axis: Any, dim: DimLike,
                    pair: tuple[str, str] = FSDP_ALL_GATHER) -> Tensor:
    """Unshard a parameter before use: ``(.., d[axis]) -> (.., d)``; backward reduce-scatter."""
    return region(x, "fsdp_all_gather", *pair, axis, dim)


def owned_block(x: Tensor, axis: Any, dim: DimLike) -> Tensor:
    """This rank's block of a replicated value (ZeRO-1 after its all-reduce): ``(.., d) ->
    (.., d[axis])``. Not differentiable (a gradient-side operation: lowered to ``SHARD``)."""
    return region(x, "owned_block", "split", "split", axis, dim)


def shard_dims(params: Mapping[str, Sequence[Dim]], sizes: Mapping[str, int],
               taken: Mapping[str, Sequence[str]] | None = None) -> dict[str, Dim]:
    """The dim each parameter is sharded along: its first declared dim (torch's ``Shard(0)``)
    whose local size the shard axis size ``n`` divides, skipping dims in ``taken[name]`` (e.g.
    already split over tp).

    Args:
        params: name -> dims. sizes: ``{"n": shard axis size, dim name -> local divisor}``.

    Raises:
        PlanError: no dim of a parameter divides over the shard axis (naming it).
    """
    n = sizes["n"]
    out: dict[str, Dim] = {}
    for name, dims in params.items():
        skip = set(taken.get(name, ())) if taken else set()
        for d in dims:
            local = d.size // sizes.get(d.name, 1) if d.name in skip else d.size
            if d.name not in skip and local % n == 0:
                out[name] = d
                break
        else:
            # only split dims left (a column-parallel bias (F[tp],)): shard the rank's block
            # again, as FSDP2 does over TP (a StridedShard: fsdp_placement)
            for d in dims:
                if d.name in skip and (d.size // sizes.get(d.name, 1)) % n == 0:
                    out[name] = d
                    break
        if name not in out:
            raise PlanError(f"{user_site(3)}: parameter {name} {tuple(d.name for d in dims)}: "
                            f"no dim divides over the shard axis (size {n}); pad it or "
                            "shrink the axis")
    return out


def fsdp_placement(dim: Dim | str, taken: Sequence[str] = ()) -> Placement:
    """The FSDP placement of a parameter along ``dim``: ``Shard(dim)``, or, when ``dim`` is
    already split over tp (``taken``), ``StridedShard(dim)``: FSDP2 shards the rank's TP block
    again (PyTorch's ``_StridedShard``; type ``dim[tp, dp]``, so the all-gather over dp gives
    back the TP block)."""
    from spec_lang.placement import StridedShard  # noqa: PLC0415

    return StridedShard(dim) if dim_name(dim) in taken else Shard(dim)


@dataclass(frozen=True, kw_only=True)
class ShardedDPSettings:
    """What a sharded data-parallel plan decides besides the mesh (all of it plan data).

    Attributes:
        stage: 1 (optimizer state sharded), 2 (+ gradients reduce-scattered), 3 (+ parameters
            sharded and all-gathered before use: FSDP).
        gather: the region pair that unshards a parameter (stage 3).
        grad_reduce: per-axis gradient reductions after accumulation, ``(axis, op)`` with op
            ``"reduce_scatter"`` (along the parameter's shard dim), ``"all_reduce"`` or
            ``"all_reduce_then_own"`` (ZeRO-1). Default: chosen from the stage and mesh.
        grad_average_axes: axes whose sizes the gradient is divided by (the AVG of FSDP's
            reduce-scatter / all-reduce). Default: every data axis.
        loss_prefactor_axes: axes whose sizes multiply each rank's seed. Default: every data
            axis (undoing the average, so each token weighs ``1/N``).
        token_count_axes: axes ``N`` is all-reduced over (``mb`` first when micro-batching).
        shard: parameter name -> dim to shard along (default :func:`shard_dims`).
    """

    stage: int = 3
    gather: tuple[str, str] = FSDP_ALL_GATHER
    grad_reduce: tuple[tuple[str, str], ...] | None = None
    grad_average_axes: tuple[str, ...] | None = None
    loss_prefactor_axes: tuple[str, ...] | None = None
    token_count_axes: tuple[str, ...] | None = None
    shard: Mapping[str, DimLike] = field(default_factory=dict)


class ShardedDP(ParallelContext):
    """Loss hook of a data-parallel Llama: seed ``prefactor * S_r / N``, report ``S / N``.

    logits: (B[data..,mb], S, V); labels, mask: (B[data..,mb], S). One instance per trace;
    :attr:`report` holds the reported loss after :meth:`loss`.
    """

    def __init__(self, data_axes: Sequence[str], token_axes: Sequence[str],
                 prefactor_axes: Sequence[str]):
        self.data_axes, self.token_axes = tuple(data_axes), tuple(token_axes)
        self.prefactor_axes = tuple(prefactor_axes)
        self.report: Tensor | None = None

    def loss(self, logits: Tensor, labels: Tensor, mask_: Tensor, d: Any) -> Tensor:
        ce = ops.cross_entropy_per_token(logits, labels, d.V)
        masked_sum = ops.sum(mask_ * ce)                     # S_r: this rank's tokens
        n = ops.sum(mask_)
        for a in self.token_axes:                            # N: the global token count
            n = all_reduce(n, a)
        rep = masked_sum
        for a in self.data_axes:
            rep = all_reduce(rep, a)
        self.report = rep / n
        seed = masked_sum
        for a in self.prefactor_axes:
            seed = ops.axis_size(a) * seed
        return seed / n


def _data_placements(model: LlamaModel, data_axes: Sequence[str]) -> dict[str, dict[str, Placement]]:
    return {k: {a: Shard(model.dims.B) for a in data_axes} for k in model.data}


def sharded_dp(model: Any, *, mesh: Mesh, shard_axis: str = DP,
               replicate_axis: str | None = None, microbatches: int | None = None,
               settings: ShardedDPSettings | None = None,
               tp_placements: Mapping[str, Mapping[str, Placement]] | None = None,
               context: ParallelContext | None = None, clip: bool = False,
               assumption: str | None = None) -> Plan:
    """The general sharded data-parallel plan (ZeRO-1/2/3, FSDP, HSDP; with TP placements).

    Args:
        model: a model following :mod:`spec_lang.models.protocol` (Llama, GPT-2, Qwen2, your
            own; an MoE model goes to :func:`spec_lang.plans.library.moe_sharded_dp`), its
            config or its spec; the spec's optimizer runs on each rank's shards.
        mesh: the device mesh; data axes are ``replicate_axis`` (if any) then ``shard_axis``.
        shard_axis: the axis parameters / gradients / optimizer state are sharded over.
        replicate_axis: HSDP's replicate axis (gradients all-reduced over it).
        microbatches: K (gradient accumulation along ``B``), or None.
        settings: stage, regions, reductions and scale factors (see :class:`ShardedDPSettings`).
        tp_placements: extra placements over other axes (FSDP x TP); the shard dim then skips
            dims already split over tp. With them, ``context`` supplies the TP hooks.
        context: a :class:`ParallelContext` factory's instance for the blocks (default
            :class:`ShardedDP`); a TP context must record ``report`` like ``MegatronTP``.
        clip: the spec clips at a global norm: give ``grad_norm_sq`` = the sum of every local
            gradient's squares all-reduced over the shard axis (each gradient handed to the
            optimizer is a disjoint ``Shard`` over it, and identical over ``dp_replicate``, so
            it is counted once: B23/B25's per-placement rule). Not with ``tp_placements``.
        assumption: the plan's one-line description (default from the stage and axes).

    Raises:
        PlanError: a stage other than 1-3, an axis not in the mesh, a parameter that no dim of
            divides over the shard axis.
    """
    from spec_lang.models.moe import MoEModel  # noqa: PLC0415
    from spec_lang.models.protocol import caller_site, model_of  # noqa: PLC0415

    site = caller_site()
    if not hasattr(model, "params"):          # a config or a spec: the model behind it
        model = model_of(model, "sharded data parallelism", site)
    if isinstance(model, MoEModel) and tp_placements is None and context is None:
        from spec_lang.plans.library import moe_sharded_dp  # noqa: PLC0415

        return dataclasses.replace(
            moe_sharded_dp(model, mesh=mesh, shard_axis=shard_axis, replicate_axis=replicate_axis,
                           microbatches=microbatches, settings=settings, clip=clip), site=site)
    s = settings or ShardedDPSettings()
    if s.stage not in (1, 2, 3):
        raise PlanError(f"{site}: stage {s.stage}: ZeRO stages are 1, 2 and 3")
    for a in (shard_axis, replicate_axis):
        if a is not None and str(a) not in mesh:
            raise PlanError(f"{site}: axis {a!r} is not in {mesh}")
    data_axes = tuple(str(a) for a in (replicate_axis, shard_axis) if a is not None)
    n = mesh[str(shard_axis)]
    tp_pl = {k: {str(a): p for a, p in v.items()} for k, v in (tp_placements or {}).items()}
    taken = {k: [p.dim for p in v.values() if isinstance(p, Shard)] for k, v in tp_pl.items()}
    local_div = {"n": n}
    for k, v in tp_pl.items():
        for a, p in v.items():
            if isinstance(p, Shard):
                local_div[p.dim] = mesh[a]
    dims = shard_dims(model.params, local_div, taken)
    for k, d in s.shard.items():
        dims[k] = next(x for x in model.params[k] if x.name == dim_name(d))
    sd = {k: d.name for k, d in dims.items()}

    placements: dict[str, dict[str, Placement]] = _data_placements(model, data_axes)
    opt_pl: dict[str, dict[str, Placement]] = {}
    for k in model.params:
        base = dict(tp_pl.get(k, {}))
        fp = fsdp_placement(sd[k], taken.get(k, ()))
        if s.stage == 3:
            placements[k] = {**base, str(shard_axis): fp}
        else:
            placements[k] = base
            opt_pl[k] = {**base, str(shard_axis): fp}
    # mesh order: an axis listed first in the mesh splits first (outermost)
    order = list(mesh.axes)
    placements = {k: dict(sorted(v.items(), key=lambda kv: order.index(kv[0])))
                  for k, v in placements.items()}
    opt_pl = {k: dict(sorted(v.items(), key=lambda kv: order.index(kv[0])))
              for k, v in opt_pl.items()}

    token_axes = ((MB,) if microbatches else ()) + data_axes
    if s.token_count_axes is not None:
        token_axes = tuple(s.token_count_axes)
    pre = data_axes if s.loss_prefactor_axes is None else tuple(s.loss_prefactor_axes)
    avg = data_axes if s.grad_average_axes is None else tuple(s.grad_average_axes)
    if s.grad_reduce is not None:
        red = tuple(s.grad_reduce)
    else:
        first = {1: "all_reduce_then_own", 2: "reduce_scatter", 3: "none"}[s.stage]
        red = ((str(shard_axis), first),)
        if replicate_axis is not None:
            red += ((str(replicate_axis), "all_reduce"),)

    def forward(p: Params, data: Mapping[str, Tensor]) -> Loss:
        if s.stage == 3:                                     # unshard every parameter
            p = Params({k: fsdp_all_gather(p[k], shard_axis, sd[k], s.gather) for k in p})
        ctx = context if context is not None else ShardedDP(data_axes, token_axes, pre)
        seed = model.forward(p, data, ctx)
        report = getattr(ctx, "report", None)
        assert report is not None, "the context must record the reported loss"
        return Loss(backward=seed, report=report)

    def reduce_grads(name: str, g: Tensor) -> Tensor:
        for a in avg:                                        # AVG = sum * 1/|axis|
            g = ops.recip(ops.axis_size(a)) * g
        for a, op in red:
            if op == "reduce_scatter":
                g = reduce_scatter(g, a, sd[name])
            elif op == "all_reduce":
                g = all_reduce(g, a)
            elif op == "all_reduce_then_own":
                g = owned_block(all_reduce(g, a), a, sd[name])
            elif op != "none":
                raise PlanError(f"{site}: gradient reduction {op!r}: reduce_scatter, "
                                "all_reduce, all_reduce_then_own or none")
        return g

    gather = None
    if s.stage in (1, 2):
        def gather(name: str, new: Tensor) -> Tensor:
            return all_gather(new, shard_axis, sd[name])

    norm_sq = None
    if clip:
        if tp_pl:
            raise PlanError(f"{site}: clip=True with TP placements: write grad_norm_sq per "
                            "placement (replicated-over-tp gradients count once)")

        def norm_sq(grads: Mapping[str, Tensor]) -> Tensor:
            local = None
            for g in grads.values():
                sq = ops.sum(g * g)
                local = sq if local is None else local + sq
            assert local is not None
            return all_reduce(local, shard_axis)

    kind = {1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3 / FSDP"}[s.stage]
    return Plan(mesh=mesh, placements=placements, forward=forward, reduce_grads=reduce_grads,
                microbatches=_microbatches(microbatches, model.dims.B) if microbatches else None,
                optimizer_placements=opt_pl, gather_params=gather, grad_norm_sq=norm_sq,
                assumptions=(assumption or (
                    f"{kind} over {shard_axis}={n}"
                    + (f" x replicate {replicate_axis}={mesh[str(replicate_axis)]}"
                       if replicate_axis else "")
                    + (f", {microbatches} micro-batches" if microbatches else "")
                    + "; token count N > 0"),),
                site=site)


def zero1(model: Any, *, dp: int, microbatches: int | None = None,
          settings: ShardedDPSettings | None = None, clip: bool = False) -> Plan:
    """ZeRO-1 on ``Mesh(dp=dp)``: optimizer state sharded, gradients all-reduced."""
    return sharded_dp(model, mesh=Mesh(dp=dp), microbatches=microbatches,
                      settings=settings or ShardedDPSettings(stage=1), clip=clip)


def zero2(model: Any, *, dp: int, microbatches: int | None = None,
          settings: ShardedDPSettings | None = None, clip: bool = False) -> Plan:
    """ZeRO-2 on ``Mesh(dp=dp)``: + gradients reduce-scattered."""
    return sharded_dp(model, mesh=Mesh(dp=dp), microbatches=microbatches,
                      settings=settings or ShardedDPSettings(stage=2), clip=clip)


def zero3(model: Any, *, dp: int, microbatches: int | None = None,
          settings: ShardedDPSettings | None = None, clip: bool = False) -> Plan:
    """ZeRO-3 on ``Mesh(dp=dp)``: + parameters sharded, all-gathered before use."""
    return sharded_dp(model, mesh=Mesh(dp=dp), microbatches=microbatches,
                      settings=settings or ShardedDPSettings(stage=3), clip=clip)


fsdp = zero3
"""FSDP (``fully_shard``) is ZeRO-3's dataflow: :func:`zero3`."""


def hsdp(model: Any, *, replicate: int, shard: int, microbatches: int | None = None,
         settings: ShardedDPSettings | None = None, clip: bool = False) -> Plan:
    """HSDP on ``Mesh(dp_replicate=replicate, dp_shard=shard)`` (torchtitan's axes): FSDP inside
    each replica (reduce-scatter over ``dp_shard``), then all-reduce over ``dp_replicate``."""
    return sharded_dp(model, mesh=Mesh(dp_replicate=replicate, dp_shard=shard),
                      shard_axis=DP_SHARD, replicate_axis=DP_REPLICATE,
                      microbatches=microbatches, settings=settings or ShardedDPSettings(),
                      clip=clip)


def fsdp_tp(model: Any, *, dp: int, tp: int, microbatches: int | None = None,
            settings: ShardedDPSettings | None = None, megatron_settings: Any = None) -> Plan:
    """torchtitan's 2-D parallelism: Megatron TP over ``tp`` inside, FSDP over ``dp``.

    Every parameter keeps its TP placement (``spec_lang.plans.megatron_placements``) and is
    further sharded over dp along its first dim that tp does not split; the blocks run with
    :class:`~spec_lang.plans.megatron.MegatronTP` hooks (its loss seed carries ``dp*K/N`` and
    ``1/K``), so the dp prefactor here is off and the average over dp stays.
    """
    from spec_lang.models.moe import MoEModel  # noqa: PLC0415
    from spec_lang.models.protocol import caller_site, model_of  # noqa: PLC0415
    from spec_lang.plans.megatron import (  # noqa: PLC0415
        MegatronSettings, MegatronTP, Scale, megatron_placements,
    )

    site = caller_site()
    model = model_of(model, "fsdp_tp", site)
    if isinstance(model, MoEModel):
        from spec_lang.plans.library import moe_fsdp_tp  # noqa: PLC0415

        return dataclasses.replace(moe_fsdp_tp(model, dp=dp, tp=tp, microbatches=microbatches,
                                               settings=settings,
                                               megatron_settings=megatron_settings), site=site)

    DP_PREFACTOR = Scale("dp", ((DP, 1),), "undoes FSDP's 1/dp average: each token weighs 1/N")

    ms = megatron_settings or MegatronSettings()
    if megatron_settings is None and not microbatches:     # no accumulation: no mb factors
        ms = dataclasses.replace(ms, token_count_axes=(DP,), loss_scale=(DP_PREFACTOR,))
    tp_pl = {k: v for k, v in megatron_placements(model, tp).items() if k in model.params}
    base = settings or ShardedDPSettings(stage=3)
    s = ShardedDPSettings(stage=base.stage, gather=base.gather, grad_reduce=base.grad_reduce,
                          grad_average_axes=base.grad_average_axes,
                          loss_prefactor_axes=(), token_count_axes=base.token_count_axes,
                          shard=base.shard)

    ctx = MegatronTP(ms)
    return sharded_dp(model, mesh=Mesh(dp=dp, tp=tp), microbatches=microbatches, settings=s,
                      tp_placements=tp_pl, context=ctx,
                      assumption=f"FSDP over dp{dp} x Megatron TP{tp}"
                                 + (f", {microbatches} micro-batches" if microbatches else "")
                                 + "; token count N > 0")


# -- flat buffers with explicit offsets ------------------------------------------------------------

@dataclass(frozen=True)
class _Entry:
    name: str
    dim: Dim          # the leading (row) dim: flattening is row-major along it
    numel: int
    start: int        # offset in the flat buffer


class FlatBuffer:
    """Parameters packed in order into one flat buffer (Megatron's ``_ParamAndGradBuffer``,
    FSDP1's ``FlatParameter``), reduce-scattered over ``axis``.

    Args:
        params: name -> dims, *in buffer order* (the first dim is the row dim: a parameter is
            laid out row-major, so a contiguous index range is a block of rows).
        axis: the data-parallel axis of the reduce-scatter; ``axis_size`` its size.
        pad: pad the buffer length to a multiple of this many elements (default ``axis_size``).

    Index map: entry ``p`` occupies ``[offset(p), offset(p) + numel(p))``; rank ``r`` owns
    ``[r L/n, (r+1) L/n)`` with ``L`` the padded length. :meth:`owners` gives, per parameter,
    ``k`` equal row blocks and the rank owning each (a rank boundary that cuts a row is a
    ``PlanError``: pad the buffer).
    """

    def __init__(self, params: Mapping[str, Sequence[Dim]], axis: Any, axis_size: int,
                 pad: int | None = None):
        self.axis, self.n = str(axis), int(axis_size)
        self.site = user_site(2)
        off = 0
        self.entries: dict[str, _Entry] = {}
        for name, dims in params.items():
            numel = math.prod(d.size for d in dims)
            self.entries[name] = _Entry(name, dims[0], numel, off)
            off += numel
        q = math.lcm(self.n, pad or self.n)
        self.length = -(-off // q) * q
        self.block = self.length // self.n

    def offset(self, name: str) -> tuple[int, int]:
        """``(start, stop)`` of ``name`` in the buffer."""
        e = self.entries[name]
        return e.start, e.start + e.numel

    def owners(self, name: str) -> list[int]:
        """The owner of each of ``k`` equal row blocks of ``name`` (``len`` is ``k``).

        Raises:
            PlanError: a rank boundary falls inside a row of ``name``.
        """
        e = self.entries[name]
        row = e.numel // e.dim.size
        cuts = sorted({e.start, e.start + e.numel}
                      | {b for b in range(0, self.length + 1, self.block)
                         if e.start < b < e.start + e.numel})
        pieces = [b - a for a, b in zip(cuts, cuts[1:])]
        unit = math.gcd(*pieces)
        if unit % row:
            raise PlanError(f"{self.site}: flat buffer over {self.axis}: a rank boundary cuts a "
                            f"row of {name} (offset {e.start}, rows of {row}); pad the buffer or "
                            "reorder it")
        k = e.numel // unit
        return [(e.start + j * unit) // self.block for j in range(k)]

    def is_sharded(self, name: str) -> bool:
        """``name``'s rows are split evenly over the ranks in rank order (a ``Shard(row dim)``)."""
        return self.owners(name) == list(range(self.n))

    def owned(self, name: str, g: Tensor, op: str = "avg") -> Tensor:
        """The rank's owned slice of ``name`` after the reduce-scatter, for a layout where the
        ownership is a ``Shard`` of the row dim: ``(.., d) -> (.., d[axis])``.

        Raises:
            PlanError: the layout gives ``name`` to the ranks in another pattern (use
                :meth:`after_reduce_scatter` and :meth:`owner_value`).
        """
        if not self.is_sharded(name):
            raise PlanError(f"{user_site(2)}: {name} is owned by ranks {self.owners(name)} of "
                            f"{self.axis} (offset {self.offset(name)} in a buffer of "
                            f"{self.length}), not one block per rank")
        e = self.entries[name]
        out = reduce_scatter(g, self.axis, e.dim)
        return ops.recip(ops.axis_size(self.axis)) * out if op == "avg" else out

    def _own(self, rank: int) -> Tensor:
        return ops.rank_const(self.axis, [1 if r == rank else 0 for r in range(self.n)])

    def after_reduce_scatter(self, name: str, g: Tensor, op: str = "avg") -> Tensor:
        """``name``'s slice of this rank's buffer after the in-place reduce-scatter.

        On the row blocks this rank owns: the reduced gradient (sum over ``axis``, times
        ``1/|axis|`` for ``op="avg"``); on every other block: this rank's own, unreduced (stale)
        gradient. Same dims as ``g``.
        """
        e = self.entries[name]
        own = self.owners(name)
        k = len(own)
        blocks = ops.chunks(g, e.dim, k) if k > 1 else [g]
        out = []
        for j, (b, r) in enumerate(zip(blocks, own)):
            red = all_reduce(b, self.axis, "avg" if op == "avg" else "sum")
            m = self._own(r)
            out.append(m * red + (ops.const(1) - m) * b)
        return ops.concat(out, e.dim) if k > 1 else out[0]

    def owner_value(self, name: str, x: Tensor) -> Tensor:
        """Each row block of ``x`` as its owner holds it (what the parameter all-gather after the
        distributed step hands every rank): ``broadcast`` from the owner, block by block.

        The rewriting has no rule that picks one rank's value of a rank-varying term, so goals
        built with this are refuted numerically but never proved (UNKNOWN at best).
        """
        e = self.entries[name]
        own = self.owners(name)
        k = len(own)
        blocks = ops.chunks(x, e.dim, k) if k > 1 else [x]
        out = [broadcast(b, self.axis, r) for b, r in zip(blocks, own)]
        return ops.concat(out, e.dim) if k > 1 else out[0]

    def ownership(self, name: str, group_size: int | None = None) -> Any:
        """The :class:`~spec_lang.ownership.Ownership` of ``name``'s row blocks under this
        layout, when the optimizer's collectives run over a group of ``group_size`` ranks of
        the axis (default: the layout's own shard count). A layout sized for more shards than
        the group has (Megatron-LM PR #6048: shards sized for dp x cp, collectives over the
        instance group) leaves the blocks of shards ``>= group_size`` without an owner.

        Raises:
            PlanError: a rank boundary cuts a row of ``name`` (:meth:`owners`).
        """
        from spec_lang.ownership import Ownership

        n = self.n if group_size is None else int(group_size)
        owners = [o if o < n else None for o in self.owners(name)]
        return Ownership(self.axis, self.entries[name].dim, owners)

    def describe(self) -> str:
        """``"[W_1 0:16 | E 16:32] over dp (2 x 16)"``: the index map."""
        parts = " | ".join(f"{e.name} {e.start}:{e.start + e.numel}" for e in self.entries.values())
        return f"[{parts}] over {self.axis} ({self.n} x {self.block})"
