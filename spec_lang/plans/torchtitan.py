"""torchtitan-style multi-dimensional parallelism: 2-D (FSDP x TP) and 3-D (FSDP x TP x PP).

torchtitan (Liang et al., "TorchTitan: One-stop PyTorch native solution for production ready LLM
pre-training", ICLR 2025, section 3.1; ``torchtitan/models/llama3/infra/parallelize.py`` and
``pipeline.py``) composes, from the inside out:

1. **TP** (``parallelize_module`` with ``ColwiseParallel`` / ``RowwiseParallel``): the Megatron
   layout of :mod:`spec_lang.plans.megatron` (heads and ``F`` split over ``tp``, vocab-parallel
   embedding, head and loss; MoE experts column/row-parallel over ``FE``, ETP = TP);
2. **FSDP** (``fully_shard`` on the ``dp_shard`` mesh dim): every parameter further ``Shard`` over
   ``dp`` along its first dim that tp does not split; all-gathered over dp before use (declared
   backward: the reduce-scatter), the gradient averaged over dp;
3. **PP** (``pipeline_module_split`` + a ``torch.distributed.pipelining`` schedule): the layers
   cut into ``pp`` stages (stage 0 also holds the embedding, the last stage the final norm, the
   head and the loss), activations sent point-to-point, the gradient accumulated over the
   micro-batches by the schedule (:mod:`spec_lang.pipeline`, :mod:`spec_lang.schedules`).

Scale factors are Megatron's named ones (``plans.megatron``): the micro-batch loss is
``dp K / N * S_mb * 1/K`` (``N`` the token count all-reduced over the K micro-batches and dp
before the loop), the K gradients are summed by the schedule's buffer, FSDP's average applies
``1/dp``. Every token's gradient weight is ``1/N``.

Entries: :func:`torchtitan_2d` (both models; the Llama one is
:func:`spec_lang.plans.sharded_dp.fsdp_tp`, the MoE one
:func:`spec_lang.plans.library.moe_fsdp_tp`) and :func:`torchtitan_3d` (this module).

MoE under PP: each MoE layer's load-balancing term ``alpha A_l`` is added to the loss on the
stage that computes it, as Megatron's ``MoEAuxLossAutoScaler`` does (its backward injects
``d(alpha A_l)`` at the layer's output, so the aux gradient never crosses a stage boundary):
in the traced program the stage hands ``A_l`` to the loss directly (no send/recv: it is not an
activation), and the reported loss includes it (Megatron's aux-loss tracker reduces it over pp).

The 3-D entry also composes (Llama 3's 4-D parallelism, arXiv 2407.21783 sec. 3.3.2; the
frontier examples ``examples/llama31_405b*.py``): Megatron **SP** inside the TP regions
(``sp=True``: activations and pipeline transfers ``Shard(S)`` over tp, the norm weights'
Partial[tp] gradients all-reduced over tp), **uneven stages** (``stage_layers``, e.g.
:func:`first_last_lighter_split`) and **CP** (``cp > 1``: the load-balanced chunks and
all-gathered K/V of :mod:`spec_lang.plans.context_parallel` inside every stage, token count and
gradients summed over cp; Llama model only).

Schedules: 1F1B, GPipe, and interleaved 1F1B (``schedule="interleaved_1f1b"`` with ``chunks``
model chunks per stage, Megatron's order; virtual stage ``j`` on stage ``j % pp``).

Limits: with CP, FSDP shards over dp only (torchtitan shards over the flattened dp x cp group:
the same gradient sums).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from spec_lang import ops
from spec_lang.collectives import region
from spec_lang.errors import PlanError
from spec_lang.mesh import Mesh
from spec_lang.models.llama import LlamaModel
from spec_lang.models.moe import MoEModel
from spec_lang.models.protocol import model_of, tp_placements
from spec_lang.pipeline import Pipeline, stage
from spec_lang.placement import Placement, Replicate, Shard
from spec_lang.plan import Loss, Plan, microbatches as _microbatches
from spec_lang.plans.library import MoEMegatronTP, _all_reduce_over, caller_site, moe_fsdp_tp
from spec_lang.cp import cp_causal_mask, cp_split
from spec_lang.plans.context_parallel import (
    CPSettings, _contiguous, _rope_tables as _cp_rope_tables, cp_transformer_block,
    require_plain_llama,
)
from spec_lang.plans.megatron import (
    MegatronSettings, MegatronTP, Scale, _scaled, partial_grad_axes, region_entries,
)
from spec_lang.plans.sharded_dp import FSDP_ALL_GATHER, ShardedDPSettings, fsdp_all_gather, \
    fsdp_placement, fsdp_tp, shard_dims
from spec_lang.schedules import gpipe, interleaved_one_f_one_b, one_f_one_b
from spec_lang.spec import Params, Spec
from spec_lang.tensor import Tensor
from spec_lang.term import Axis

__all__ = ["TorchtitanSettings", "torchtitan_2d", "torchtitan_3d", "megatron_3d",
           "pp_layer_split", "first_last_lighter_split"]

DP, TP, PP, MB, CP = Axis.DP, Axis.TP, Axis.PP, Axis.MB, Axis.CP


def _model(model: Any) -> Any:
    return model_of(model, "torchtitan plans", caller_site())


def torchtitan_2d(model: Any, *, dp: int, tp: int, microbatches: int | None = None,
                  settings: ShardedDPSettings | None = None,
                  megatron_settings: MegatronSettings | None = None) -> Plan:
    """torchtitan's 2-D parallelism, FSDP over ``dp`` x TP over ``tp``, on a Llama or MoE model.

    The Llama plan is :func:`spec_lang.plans.sharded_dp.fsdp_tp`; the MoE plan
    :func:`spec_lang.plans.library.moe_fsdp_tp` (experts ETP = TP). ``Mesh(dp=dp, tp=tp)``.

    Raises:
        PlanError: a model of another kind; sizes that do not divide (while tracing).
    """
    site = caller_site()
    m = _model(model)
    fn = moe_fsdp_tp if isinstance(m, MoEModel) else fsdp_tp
    plan = fn(m, dp=dp, tp=tp, microbatches=microbatches, settings=settings,
              megatron_settings=megatron_settings)
    return dataclasses.replace(plan, site=site)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TorchtitanSettings:
    """What the 3-D plan decides besides the mesh (all plan data; the mutants change it).

    Attributes:
        megatron: the TP regions and the loss scale factors (``plans.megatron``).
        gather: FSDP's unshard region pair (all-gather, declared backward reduce-scatter).
        grad_scale: factors on each gradient after the schedule's accumulation (FSDP's 1/dp).
        schedule: ``"1f1b"``, ``"gpipe"`` or ``"interleaved_1f1b"`` (with ``chunks``).
        aux_on_stage: MoE: add each layer's ``alpha A_l`` to the loss (False drops it: a mutant).
        tied_reduce: all-reduce over ``pp`` the gradient of a parameter held by two stages
            (GPT-2's / Qwen2-0.5B's tied embedding and head: Megatron's embedding group);
            False is the B64 bug (tied copies never synchronised).
        data_parallel: ``"fsdp"`` (torchtitan: parameters Shard over dp, all-gathered before use)
            or ``"ddp"`` (Megatron-LM's 3-D TP x PP x DP: parameters replicated over dp, the
            gradient scaled by ``1/dp`` and all-reduced over dp after the schedule).
        stage_layers: layer counts per pipeline stage (``None``: equal;
            :func:`first_last_lighter_split` is Llama 3's); with ``chunks > 1`` per *virtual*
            stage (``pp * chunks`` of them, model order; 0 allowed: a chunk holding only the
            embedding or only the head, as in Llama 3's interleaved schedule).
        chunks: model chunks per stage (``v``) for ``schedule="interleaved_1f1b"``
            (:func:`spec_lang.schedules.interleaved_one_f_one_b`; virtual stage ``j`` runs on
            stage ``j % pp``).
        context: with ``cp > 1``, the CP choices (:class:`~spec_lang.plans.context_parallel.
            CPSettings`: chunk map of the labels, RoPE positions, the K/V gather pair, the token
            count axes, the gradient axes; its ``dp`` entries are the 3-D plan's own).
    """

    megatron: MegatronSettings = MegatronSettings()
    gather: tuple[str, str] = FSDP_ALL_GATHER
    grad_scale: tuple[Scale, ...] = MegatronSettings().grad_scale
    schedule: str = "1f1b"
    aux_on_stage: bool = True
    tied_reduce: bool = True
    data_parallel: str = "fsdp"
    stage_layers: tuple[int, ...] | None = None
    context: CPSettings = CPSettings()
    chunks: int = 1


def pp_layer_split(n_layers: int, pp: int, sizes: Sequence[int] | None = None) -> list[range]:
    """Layers of each pipeline stage, consecutive blocks in model order.

    ``sizes=None``: ``pp`` equal blocks (torchtitan's ``pipeline_module_split`` with even
    splits). ``sizes``: explicit layer counts per stage (Megatron-LM's
    ``--decoder-first-pipeline-num-layers`` / ``--decoder-last-pipeline-num-layers``, torchtitan's
    ``module_fqns_per_model_part``), e.g. :func:`first_last_lighter_split`.

    Raises:
        PlanError: ``pp`` does not divide the layer count; ``sizes`` not ``pp`` non-negative
            counts summing to ``n_layers``.
    """
    if sizes is not None:
        sz = list(sizes)
        if len(sz) != pp or any(not isinstance(k, int) or isinstance(k, bool) or k < 0
                                for k in sz) or sum(sz) != n_layers:
            raise PlanError(f"{caller_site()}: stage_layers {tuple(sz)} must be {pp} "
                            f"non-negative layer counts summing to the {n_layers} layers")
        out, start = [], 0
        for k in sz:
            out.append(range(start, start + k))
            start += k
        return out
    if pp < 1 or n_layers % pp:
        raise PlanError(f"{caller_site()}: pp={pp} must divide the {n_layers} layers")
    per = n_layers // pp
    return [range(s * per, (s + 1) * per) for s in range(pp)]


def first_last_lighter_split(n_layers: int, pp: int) -> tuple[int, ...]:
    """Llama 3's stage sizes (arXiv 2407.21783, section 3.3.2, "Pipeline parallelism
    improvements"): one Transformer layer fewer on the first and on the last stage, which also
    hold the embedding and the output head and loss. ``n_layers + 2`` must divide by ``pp``
    (405B: 126 layers, pp 16 -> ``(7, 8 x 14, 7)``). For an interleaved schedule pass the
    number of *virtual* stages ``pp * v``: with one layer per chunk the first chunk holds only
    the embedding and the last only the head and loss, as in the paper (126 layers, pp 16,
    v 8 -> ``(0, 1 x 126, 0)``).

    Raises:
        PlanError: ``pp < 2`` or ``pp`` does not divide ``n_layers + 2``.
    """
    if pp < 2 or (n_layers + 2) % pp:
        raise PlanError(f"{caller_site()}: first/last-lighter split: pp={pp} must divide "
                        f"n_layers + 2 = {n_layers + 2}")
    per = (n_layers + 2) // pp
    return (per - 1,) + (per,) * (pp - 2) + (per - 1,)


def torchtitan_3d(model: Any, *, dp: int, tp: int, pp: int, microbatches: int,
                  settings: TorchtitanSettings | None = None, cp: int = 1,
                  sp: bool | None = None) -> Plan:
    """torchtitan's 3-D parallelism, FSDP over ``dp`` x TP over ``tp`` x PP over ``pp`` (module
    docstring), on ``Mesh(pp=pp, dp=dp, tp=tp)`` with ``microbatches`` micro-batches.

    Args:
        model: a Llama or MoE model, config, or spec.
        dp, tp, pp: mesh sizes (``pp`` divides the layer count; ``dp K`` divides ``B``).
        microbatches: K, the pipeline's micro-batches.
        settings: see :class:`TorchtitanSettings`.
        cp: context parallelism (Llama only): ``cp > 1`` adds a ``cp`` mesh axis
            (``Mesh(pp, dp, cp, tp)``); every stage holds its rank's load-balanced sequence
            chunks (``cp_split`` of tokens, labels, mask, RoPE tables and causal mask, as in
            :func:`spec_lang.plans.context_parallel.context_parallel`), attention all-gathers
            K/V over cp (the rank's TP heads), the token count is summed over cp too, the
            reported loss all-reduced over cp and every gradient all-reduced over cp
            (parameters are replicated over cp; FSDP shards over dp only).
        sp: Megatron sequence parallelism inside the TP regions (overrides
            ``settings.megatron.sp``): the residual stream and the pipeline's activations are
            ``Shard(S)`` over tp; the norm weights' Partial[tp] gradients are all-reduced over
            tp (:func:`~spec_lang.plans.megatron.partial_grad_axes`).

    Returns:
        the :class:`Plan` (a :class:`~spec_lang.pipeline.Pipeline` schedule); the spec's
        optimizer runs on each rank's (dp, tp) shards of the parameters its stage holds.

    Raises:
        PlanError: ``pp`` not dividing the layers, a parameter no dim of divides over dp,
            an unknown schedule.
    """
    site = caller_site()
    m = _model(model)
    st = settings or TorchtitanSettings()
    ms = st.megatron if sp is None else dataclasses.replace(st.megatron, sp=sp)
    is_moe = isinstance(m, MoEModel)
    c, d = m.config, m.dims
    pieces = m.stages()
    alpha = getattr(c, "aux_loss_alpha", 0)
    if cp > 1 and not isinstance(m, LlamaModel):
        raise PlanError(f"{site}: cp={cp}: the 3-D plan's context parallelism is for the Llama "
                        "model (use plans.library.moe_context_parallel for the MoE model)")
    if cp > 1:
        require_plain_llama(m, "torchtitan_3d(cp > 1)")
    mesh = Mesh(pp=pp, dp=dp, cp=cp, tp=tp) if cp > 1 else Mesh(pp=pp, dp=dp, tp=tp)
    cps = st.context
    tp_pl = {k: v for k, v in tp_placements(m, tp).items() if k in m.params}
    taken = {k: [p.dim for p in v.values() if isinstance(p, Shard)] for k, v in tp_pl.items()}
    local_div: dict[str, int] = {"n": dp}
    for v in tp_pl.values():
        for a, p in v.items():
            if isinstance(p, Shard):
                local_div[p.dim] = mesh[a]
    sd = {k: x.name for k, x in shard_dims(m.params, local_div, taken).items()}
    order = list(mesh.axes)
    placements: dict[str, dict[str, Placement]] = {
        k: {DP: Shard(d.B)} for k in ("tokens", "labels", "mask")}
    fsdp = st.data_parallel == "fsdp"
    if st.data_parallel not in ("fsdp", "ddp"):
        raise PlanError(f"{site}: data_parallel {st.data_parallel!r}: 'fsdp' or 'ddp'")
    for k in m.params:
        pl = {**tp_pl.get(k, {}), **({DP: fsdp_placement(sd[k], taken.get(k, ()))}
                                     if fsdp else {})}
        placements[k] = dict(sorted(pl.items(), key=lambda kv: order.index(kv[0])))
    enter = set(region_entries(m, tp_pl)) if ms.replicated_weights_enter_tp else set()
    count_axes = tuple(ms.token_count_axes)
    if cp > 1:
        count_axes += tuple(a for a in cps.token_count_axes if a not in count_axes)
        ms = dataclasses.replace(ms, token_count_axes=count_axes)

    def ctx_() -> MegatronTP:
        return MoEMegatronTP(ms, count_axes) if is_moe else MegatronTP(ms)

    def unshard(p: Params) -> Params:
        ts = {}
        for k in p:
            x = fsdp_all_gather(p[k], DP, sd[k], st.gather) if fsdp else p[k]
            if k in enter:
                x = region(x, "copy_to_tp", *ms.copy_to_tp, TP)
            ts[k] = x
        return Params(ts)

    carried: dict[str, Any] = {}      # MoE: the stages' aux terms (MoEAuxLossAutoScaler)

    def blocks(p: Params, x: Tensor, data: Mapping[str, Tensor], layers: range) -> Tensor:
        ctx = ctx_()
        if cp > 1:
            cos, sin = _cp_rope_tables(dl, c.rope_theta, cps)
            causal = cp_causal_mask(dl.S, dl.T)
        for i in layers:
            if cp > 1:
                x = cp_transformer_block(p.scope(f"layers.{i}"), x, m, cos, sin, causal, cps,
                                         ctx)
                continue
            x, a = pieces.block(i, p, x, data, ctx)
            if a is not None and st.aux_on_stage and alpha:
                carried["aux"] = a if carried.get("aux") is None else carried["aux"] + a
        return x

    if st.chunks < 1 or (st.chunks > 1 and st.schedule != "interleaved_1f1b"):
        raise PlanError(f"{site}: chunks={st.chunks} needs schedule='interleaved_1f1b' "
                        "(one model chunk per stage otherwise)")
    n_virtual = pp * st.chunks                # virtual stage j runs on stage j % pp
    split = pp_layer_split(c.n_layers, n_virtual, st.stage_layers)
    dl = d.llama if is_moe else d

    def make_stage(s: int) -> Any:
        first, last = s == 0, s == n_virtual - 1

        def run(p: Any, data: Mapping[str, Tensor], io: Any) -> Any:
            q = unshard(p)
            if cp > 1:                  # the rank's load-balanced chunks (context_parallel.py)
                data = {**data, "tokens": cp_split(data["tokens"], dl.S),
                        "mask": cp_split(data["mask"], dl.S),
                        "labels": (cp_split(data["labels"], dl.S)
                                   if cps.label_map == "load_balanced"
                                   else _contiguous(data["labels"], dl.S))}
            if first:
                carried.clear()
                x = pieces.embed(q, data, ctx_())
            else:
                x = io.recv()
            x = blocks(q, x, data, split[s])
            if not last:
                io.send(x)
                return None
            ctx = ctx_()
            seed = pieces.head(q, x, data, ctx)
            assert ctx.report is not None
            report = ctx.report
            if cp > 1:
                report = _all_reduce_over(report, (CP,))
            aux = carried.get("aux")
            if aux is not None:
                a = aux * alpha
                seed = seed + _scaled(a, ms.loss_scale)
                report = report + _all_reduce_over(a, (DP,))
            return Loss(backward=seed, report=report)

        held = [f"layers.{i}." for i in split[s]]
        if first:
            held += list(pieces.embed_params)
        if last:
            held += [k for k in pieces.head_params if k not in held]
        return stage(run, held)

    if st.schedule not in ("1f1b", "gpipe", "interleaved_1f1b"):
        raise PlanError(f"{site}: schedule {st.schedule!r}: '1f1b', 'gpipe' or "
                        "'interleaved_1f1b'")
    if st.schedule == "interleaved_1f1b":
        sched = interleaved_one_f_one_b(pp=pp, microbatches=microbatches, chunks=st.chunks)
    else:
        sched = (one_f_one_b if st.schedule == "1f1b" else gpipe)(pp=pp,
                                                                 microbatches=microbatches)
    pipe = Pipeline([make_stage(s) for s in range(n_virtual)], schedule=sched)

    cp_grad_axes = tuple(a for a in cps.grad_reduce_axes if a != DP) if cp > 1 else ()

    def reduce_grads(name: str, g: Tensor) -> Tensor:
        if len(pipe.stages_of(name)) > 1 and st.tied_reduce:
            # tied (GPT-2's embedding and head on the first and last stage): each holder has
            # its own uses' gradient; Megatron's embedding group sums them over pp
            g = _all_reduce_over(g, (PP,))
        g = _scaled(g, st.grad_scale)   # FSDP: the reduce-scatter is the gather's backward
        if ms.sp and partial_grad_axes(g, placements.get(name, {})):
            g = _all_reduce_over(g, ms.sp_grad_reduce_axes)  # SP: norm weights' Partial[tp]
        g = _all_reduce_over(g, cp_grad_axes)                # CP: replicated over cp
        if not fsdp:
            g = _all_reduce_over(g, ms.grad_reduce_axes)         # DDP: all-reduce over dp
        return g

    return Plan(mesh=mesh, placements=placements, forward=pipe.forward, schedule=pipe,
                reduce_grads=reduce_grads, microbatches=_microbatches(microbatches, d.B),
                assumptions=(f"{'torchtitan' if fsdp else 'Megatron-LM'} 3-D: "
                             f"{'FSDP' if fsdp else 'DDP'} over dp{dp} x TP{tp}"
                             f"{'+SP' if ms.sp else ''}{f' x CP{cp}' if cp > 1 else ''} x PP{pp} "
                             f"({st.schedule}{f' v={st.chunks}' if st.chunks > 1 else ''}, "
                             f"{microbatches} micro-batches"
                             f"{'' if st.stage_layers is None else ', layers per stage '}"
                             f"{'' if st.stage_layers is None else _runs(st.stage_layers)})"
                             + (", dense routing" if is_moe else "") + "; token count N > 0",),
                site=site)


def _runs(sizes: Sequence[int]) -> str:
    """``(7, 8, 8, 7)`` -> ``"7/8x2/7"`` (runs of equal layer counts)."""
    out: list[str] = []
    i = 0
    while i < len(sizes):
        j = i
        while j < len(sizes) and sizes[j] == sizes[i]:
            j += 1
        out.append(str(sizes[i]) + (f"x{j - i}" if j - i > 1 else ""))
        i = j
    return "/".join(out)


def megatron_3d(model: Any, *, tp: int, dp: int, pp: int, microbatches: int,
                schedule: str = "1f1b", sp: bool = False,
                stage_layers: Sequence[int] | None = None,
                settings: TorchtitanSettings | None = None) -> Plan:
    """Megatron-LM's 3-D parallelism TP x PP x DP (Narayanan et al., SC'21, "Efficient
    Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", section 2): the
    3-D pipeline of :func:`torchtitan_3d` with DDP instead of FSDP (parameters replicated over
    dp; ``1/dp`` then all-reduce over dp after the schedule's accumulation). ``sp``: sequence
    parallelism with TP; ``stage_layers``: layer counts per stage; ``settings``: the rest (its
    ``data_parallel``, ``schedule`` and ``stage_layers`` are set from the arguments)."""
    st = dataclasses.replace(settings or TorchtitanSettings(), data_parallel="ddp",
                             schedule=schedule,
                             stage_layers=None if stage_layers is None else tuple(stage_layers))
    plan = torchtitan_3d(model, dp=dp, tp=tp, pp=pp, microbatches=microbatches, settings=st,
                         sp=sp)
    return dataclasses.replace(plan, site=caller_site())
