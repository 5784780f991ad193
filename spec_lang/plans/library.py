"""The plan library on the DeepSeek-style MoE model: thin adapters over the Llama recipes.

The recipes of :mod:`spec_lang.plans` are written for the Llama model; the MoE model
(:mod:`spec_lang.models.moe`) runs the same attention, embedding, head and loss hooks, plus

* ``dispatch`` / ``combine`` around the routed experts, and ``routing_count`` (the per-expert
  count of routing assignments, which must be the *global* count: an all-reduce over every axis
  that splits the tokens, micro-batches included: CASES.md B28);
* the load-balancing term ``A`` (Switch Transformer eq. 4), which a rank holding a block of the
  tokens computes as its addend ``A_r`` (global counts, its own router probabilities over the
  global token count): ``Partial(sum)`` over the token axes. The training objective is
  ``CE + alpha A``, so ``alpha A_r`` gets *the same* seed factors as the rank's cross-entropy
  term (B28: pre-multiply a Partial term by every group that later averages it), and its
  reported value is summed over the token axes.

Each adapter below reuses the recipe's own pieces (contexts, placements, settings, scale
factors) and only adds these two things:

* :func:`moe_megatron`: Megatron TP (+SP) x DP x K (``plans.megatron``'s context, settings,
  placements of attention / embedding / head, scale factors); experts ETP = TP over ``FE``,
  dispatch = ``f``, combine = ``g``;
* :func:`moe_sharded_dp` (:func:`moe_zero1`, :func:`moe_zero2`, :func:`moe_zero3`,
  :func:`moe_fsdp`, :func:`moe_hsdp`) and :func:`moe_fsdp_tp`: ``plans.sharded_dp.sharded_dp``
  on :class:`MoEAsDense`; counts over the data axes;
* :func:`moe_context_parallel`: Megatron CP x DP (``plans.context_parallel``'s token map, RoPE
  tables, causal mask, ``cp_attention``); counts over ``cp x dp``;
* :func:`distributed_optimizer`: Megatron TP x DP with the distributed optimizer, both models.

Megatron's MoE conventions (``megatron/core/transformer/moe``): with tensor parallelism and no
expert parallelism the experts are tensor-parallel with the same group (expert tensor
parallelism ``ETP = TP``): ``w1``/``w3`` column-parallel and ``w2`` row-parallel over the
expert FFN width ``FE``; the tokens enter the experts through ``f`` (with SP: the all-gather of
``gather_from_sequence_parallel_region``, the ``allgather`` token dispatcher) and leave through
``g`` (with SP: the reduce-scatter). The router is replicated; the shared expert is a dense MLP,
column/row-parallel over ``FS`` (``SharedExpertMLP``). Megatron requires SP with MoE and TP
(``arguments.py``: "When using MoE and tensor parallelism, sequence parallelism must be used");
the plan without SP is proved too.

Limits: dense routing (no capacity, no token dropping); micro-batching with CP and with EP is not
modelled; the MoE pipeline entry is in :mod:`spec_lang.plans.torchtitan`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from spec_lang import ops
from spec_lang.collectives import all_reduce, region
from spec_lang.cp import cp_causal_mask, cp_split
from spec_lang.errors import PlanError
from spec_lang.mesh import Mesh
from spec_lang.models.llama import LlamaDims, llama
from spec_lang.models.protocol import caller_site, tp_placements
from spec_lang.models.moe import (
    MoEConfig, MoEContext, MoEDims, MoEModel, moe, moe_forward, moe_layer,
)
from spec_lang.placement import Placement, Replicate, Shard
from spec_lang.plan import Loss, Plan, microbatches as _microbatches
from spec_lang.plans.clipping import grad_norm_sq_fn
from spec_lang.plans.context_parallel import CPSettings, _contiguous, _rope_tables, cp_attention
from spec_lang.plans.megatron import (
    MegatronSettings, MegatronTP, Scale, colwise, grad_reducer, layer_plan,
    replicated, rowwise,
)
from spec_lang.plans.sharded_dp import DP_REPLICATE, DP_SHARD, ShardedDP, ShardedDPSettings, \
    sharded_dp
from spec_lang.spec import Params, Spec
from spec_lang.tensor import Tensor
from spec_lang.term import Axis

__all__ = ["MoEMegatronTP", "MoEShardedDP", "MoECP", "moe_layer_plan", "moe_megatron_placements",
           "moe_megatron", "moe_sharded_dp", "moe_zero1", "moe_zero2", "moe_zero3", "moe_fsdp",
           "moe_hsdp", "moe_fsdp_tp", "moe_context_parallel", "MoEAsDense", "moe_model_of",
           "EXPERT_TP_WEIGHTS", "distributed_optimizer", "caller_site"]

DP, TP, MB, CP = Axis.DP, Axis.TP, Axis.MB, Axis.CP

EXPERT_TP_WEIGHTS = ("moe.experts.w1", "moe.experts.w3", "moe.experts.w2",
                     "moe.shared.w1", "moe.shared.w3", "moe.shared.w2")
"""MoE weights consumed inside a TP region (between ``f`` and ``g``)."""

_TP_REGION = ("attn.wq", "attn.wk", "attn.wv", "attn.wo") + EXPERT_TP_WEIGHTS


def moe_model_of(model: MoEModel | MoEConfig | Spec, what: str = "this plan") -> MoEModel:
    """The :class:`MoEModel` of a model, its config, or a spec made by ``MoEModel.spec``.

    Raises:
        PlanError: anything else (naming the caller's line).
    """
    if isinstance(model, MoEModel):
        return model
    if isinstance(model, MoEConfig):
        return moe(model)
    owner = getattr(getattr(model, "forward", None), "__self__", None)
    if isinstance(owner, MoEModel):
        return owner
    raise PlanError(f"{caller_site()}: {what} needs an MoEModel, an MoEConfig or a spec made by "
                    f"MoEModel.spec, got {type(model).__name__}")


def _all_reduce_over(x: Tensor, axes: Sequence[str]) -> Tensor:
    for a in axes:
        x = all_reduce(x, a)
    return x


def _seed_and_report(main_seed: Tensor, main_report: Tensor, aux_r: Tensor | None,
                     c: MoEConfig, aux_scales: Sequence[Tensor], report_axes: Sequence[str]
                     ) -> Loss:
    """``seed = main_seed + alpha A_r prod(aux_scales)``; ``report = main_report + alpha
    AR_sum[report_axes](A_r)`` (each micro-batch's report is summed over mb by the plan)."""
    if not c.aux_loss_alpha or aux_r is None:
        return Loss(backward=main_seed, report=main_report)
    a = aux_r * c.aux_loss_alpha
    seed_a = a
    for f in aux_scales:
        seed_a = f * seed_a
    return Loss(backward=main_seed + seed_a,
                report=main_report + _all_reduce_over(a, report_axes))


# -- Megatron TP (+SP) x DP x K ------------------------------------------------------------------

class MoEMegatronTP(MegatronTP, MoEContext):
    """Megatron's TP hooks plus the MoE ones: tokens enter the (tensor-parallel) experts
    through ``f`` (SP: all-gather S) and leave through ``g`` (SP: reduce-scatter S); routing
    counts all-reduced over the token axes (mb, dp, and tp under SP)."""

    def __init__(self, settings: MegatronSettings, count_axes: Sequence[str]):
        super().__init__(settings)
        self.count_axes = tuple(count_axes)

    def dispatch(self, xe: Tensor, d: MoEDims) -> Tensor:
        return self.enter_tp(xe, d.llama)                    # (B, S, E, H) into the TP region

    def combine(self, ye: Tensor, d: MoEDims) -> Tensor:
        return self.exit_tp(ye, d.llama)                     # Partial over tp -> reduced

    def routing_count(self, count: Tensor, d: MoEDims) -> Tensor:
        return _all_reduce_over(count, self.count_axes)


def moe_layer_plan(config: MoEConfig, tp: int) -> dict[str, dict[str, Placement]]:
    """Per-layer placements over tp (:meth:`MoEModel.tp_layer_plan`): attention as
    :func:`~spec_lang.plans.megatron.layer_plan` (heads split), router and norms replicated,
    routed experts column/row-parallel over ``FE`` (ETP = TP), the shared expert over ``FS``.

    Raises:
        PlanError: tp splits neither the KV heads nor the query groups.
    """
    return moe(dataclasses.replace(config, n_layers=1)).tp_layer_plan(tp)


def moe_megatron_placements(model: MoEModel, tp: int,
                            layers: Mapping[str, Mapping[str, Placement]] | None = None
                            ) -> dict[str, dict[str, Placement]]:
    """Every parameter's and data input's placement (vocab-parallel embedding and head, tokens
    ``Shard(B)`` over dp, the selection bias replicated):
    :func:`spec_lang.models.protocol.tp_placements`."""
    return tp_placements(model, tp, layers)


def moe_megatron(model: MoEModel | MoEConfig | Spec, *, tp: int, dp: int, microbatches: int,
                 sp: bool = False, layers: Mapping[str, Mapping[str, Placement]] | None = None,
                 settings: MegatronSettings | None = None,
                 aux_scale: Sequence[Scale] | None = None,
                 routing_count_axes: Sequence[str] | None = None) -> Plan:
    """Megatron-LM TP (+SP) x DP x K on the MoE model (module docstring).

    Same regions, placements of attention / embedding / head, scale factors and gradient
    reduction as :func:`~spec_lang.plans.megatron.megatron`; the experts are tensor-parallel
    over ``FE`` (ETP = TP). The aux term's seed factors are ``settings.loss_scale``
    (``dp K`` and ``1/K``) unless ``aux_scale`` overrides them (mutants).

    Args:
        model: an :class:`MoEModel`, its config, or its spec.
        tp, dp, microbatches: mesh sizes and K (``B % (dp K) == 0``; with ``sp``, ``S % tp == 0``).
        sp: Megatron sequence parallelism (Megatron requires it for MoE with TP).
        layers: per-layer placements (default :func:`moe_layer_plan`).
        settings: Megatron's regions and scale factors (``plans.megatron.MegatronSettings``).
        aux_scale: the seed factors of ``alpha A_r`` (default ``settings.loss_scale``).
        routing_count_axes: the axes the per-expert routing counts are all-reduced over
            (default: ``settings.token_count_axes``, plus ``tp`` with SP: every axis that
            splits the tokens).

    Raises:
        PlanError: heads that tp cannot split; sizes that do not divide (while tracing).
    """
    m = moe_model_of(model, "moe_megatron")
    s = dataclasses.replace(settings or MegatronSettings(), sp=sp)
    site = caller_site()
    c = m.config
    pl = moe_megatron_placements(m, tp, layers)
    enter_weights = [k for k, v in pl.items()
                     if k in m.params and k.split(".", 2)[-1] in _TP_REGION
                     and not isinstance(v.get(TP, Replicate()), Shard)]
    count_axes = (tuple(s.token_count_axes) + ((TP,) if sp else ())
                  if routing_count_axes is None else tuple(routing_count_axes))
    report_axes = (DP, TP) if sp else (DP,)
    aux = tuple(aux_scale) if aux_scale is not None else tuple(s.loss_scale)

    def forward(p: Params, data: Mapping[str, Tensor]) -> Loss:
        if s.replicated_weights_enter_tp and enter_weights:
            ts = {k: p[k] for k in p}
            for k in enter_weights:
                ts[k] = region(ts[k], "copy_to_tp", *s.copy_to_tp, TP)
            p = Params(ts)
        ctx = MoEMegatronTP(s, count_axes)
        main_seed, aux_r = moe_forward(p, data, c, m.dims, ctx)
        assert ctx.report is not None
        return _seed_and_report(main_seed, ctx.report, aux_r, c, [x.tensor() for x in aux],
                                report_axes)

    reduce_grads = grad_reducer(s, pl)
    mesh = Mesh(dp=dp, tp=tp)
    return Plan(mesh=mesh, placements=pl, forward=forward, reduce_grads=reduce_grads,
                grad_norm_sq=grad_norm_sq_fn(mesh=mesh),
                microbatches=_microbatches(microbatches, m.dims.B),
                assumptions=(f"Megatron-LM MoE TP{tp}{'+SP' if sp else ''} (ETP=TP) x DP{dp}, "
                             f"{microbatches} micro-batches, dense routing; token count N > 0",),
                site=site)


# -- sharded data parallelism: ZeRO-1/2/3, FSDP, HSDP, FSDP x TP ----------------------------------

class MoEShardedDP(ShardedDP, MoEContext):
    """:class:`~spec_lang.plans.sharded_dp.ShardedDP`'s loss hook plus global routing counts."""

    def routing_count(self, count: Tensor, d: MoEDims) -> Tensor:
        return _all_reduce_over(count, self.token_axes)


class MoEAsDense:
    """The MoE model in the shape :func:`~spec_lang.plans.sharded_dp.sharded_dp` takes
    (``params``, ``data``, ``dims``, ``forward(p, data, ctx)`` returning the seed): the forward
    adds ``alpha A_r`` times the seed's data-axis factors and records the report.

    Args:
        model: the MoE model.
        aux_scale_axes: axes whose sizes multiply ``alpha A_r`` in the seed (the loss
            pre-factor's axes: the data axes for plain sharded DP, none when a TP context's
            loss already carries them and ``aux_scales`` does).
        report_axes: axes ``alpha A_r`` is summed over in the reported loss.
        aux_scales: extra :class:`Scale` factors on ``alpha A_r`` (FSDP x TP: Megatron's).
        enter_tp, copy_to_tp: replicated-over-tp weights used inside a TP region (the KV
            projections when ``kv_heads < tp``) and Megatron's ``f`` they enter it through.
    """

    def __init__(self, model: MoEModel, aux_scale_axes: Sequence[str],
                 report_axes: Sequence[str], aux_scales: Sequence[Scale] = (),
                 enter_tp: Sequence[str] = (), copy_to_tp: tuple[str, str] = ("", "")):
        self.model = model
        self.enter_tp = tuple(enter_tp)
        self.copy_to_tp = copy_to_tp
        self.config = model.config
        self.dims = model.dims
        self.params = model.params
        self.data = model.data
        self.aux_scale_axes = tuple(aux_scale_axes)
        self.report_axes = tuple(report_axes)
        self.aux_scales = tuple(aux_scales)

    def forward(self, p: Params, data: Mapping[str, Tensor], ctx: Any) -> Tensor:
        if self.enter_tp:
            ts = {k: p[k] for k in p}
            for k in self.enter_tp:
                ts[k] = region(ts[k], "copy_to_tp", *self.copy_to_tp, TP)
            p = Params(ts)
        main_seed, aux_r = moe_forward(p, data, self.config, self.dims, ctx)
        report = getattr(ctx, "report", None)
        assert report is not None, "the context must record the reported loss"
        facs = [ops.axis_size(a) for a in self.aux_scale_axes] + [
            x.tensor() for x in self.aux_scales]
        out = _seed_and_report(main_seed, report, aux_r, self.config, facs, self.report_axes)
        ctx.report = out.report
        return out.backward


def _drop_non_batch_data(plan: Plan, model: MoEModel) -> Plan:
    """``sharded_dp`` shards every data input over ``B``; the selection bias ``(E,)`` is
    replicated."""
    pl = {k: v for k, v in plan.placements.items()
          if k not in model.data or model.dims.B in model.data[k].dims}
    return dataclasses.replace(plan, placements=pl)


def moe_sharded_dp(model: MoEModel | MoEConfig | Spec, *, mesh: Mesh, shard_axis: str = DP,
                   replicate_axis: str | None = None, microbatches: int | None = None,
                   settings: ShardedDPSettings | None = None, clip: bool = False) -> Plan:
    """:func:`~spec_lang.plans.sharded_dp.sharded_dp` on the MoE model (ZeRO-1/2/3, FSDP, HSDP):
    the same stages, regions and reductions; the routing counts are all-reduced over the token
    axes and ``alpha A_r`` carries the loss pre-factor (the data axes' sizes)."""
    m = moe_model_of(model, "moe_sharded_dp")
    s = settings or ShardedDPSettings()
    data_axes = tuple(str(a) for a in (replicate_axis, shard_axis) if a is not None)
    token_axes = ((MB,) if microbatches else ()) + data_axes
    if s.token_count_axes is not None:
        token_axes = tuple(s.token_count_axes)
    pre = data_axes if s.loss_prefactor_axes is None else tuple(s.loss_prefactor_axes)
    ctx = MoEShardedDP(data_axes, token_axes, pre)
    dense = MoEAsDense(m, pre, data_axes)
    plan = sharded_dp(dense, mesh=mesh, shard_axis=shard_axis,  # type: ignore[arg-type]
                      replicate_axis=replicate_axis, microbatches=microbatches, settings=s,
                      context=ctx, clip=clip)
    return dataclasses.replace(_drop_non_batch_data(plan, m), site=caller_site())


def moe_zero1(model: Any, *, dp: int, microbatches: int | None = None,
              settings: ShardedDPSettings | None = None, clip: bool = False) -> Plan:
    """ZeRO-1 on the MoE model (``Mesh(dp=dp)``): optimizer state sharded."""
    return moe_sharded_dp(model, mesh=Mesh(dp=dp), microbatches=microbatches,
                          settings=settings or ShardedDPSettings(stage=1), clip=clip)


def moe_zero2(model: Any, *, dp: int, microbatches: int | None = None,
              settings: ShardedDPSettings | None = None, clip: bool = False) -> Plan:
    """ZeRO-2 on the MoE model: + gradients reduce-scattered (Megatron's distributed optimizer
    without TP)."""
    return moe_sharded_dp(model, mesh=Mesh(dp=dp), microbatches=microbatches,
                          settings=settings or ShardedDPSettings(stage=2), clip=clip)


def moe_zero3(model: Any, *, dp: int, microbatches: int | None = None,
              settings: ShardedDPSettings | None = None, clip: bool = False) -> Plan:
    """ZeRO-3 / FSDP on the MoE model: + parameters sharded, all-gathered before use."""
    return moe_sharded_dp(model, mesh=Mesh(dp=dp), microbatches=microbatches,
                          settings=settings or ShardedDPSettings(stage=3), clip=clip)


moe_fsdp = moe_zero3


def moe_hsdp(model: Any, *, replicate: int, shard: int, microbatches: int | None = None,
             settings: ShardedDPSettings | None = None, clip: bool = False) -> Plan:
    """HSDP on the MoE model, ``Mesh(dp_replicate, dp_shard)`` (torchtitan's axes)."""
    return moe_sharded_dp(model, mesh=Mesh(dp_replicate=replicate, dp_shard=shard),
                          shard_axis=DP_SHARD, replicate_axis=DP_REPLICATE,
                          microbatches=microbatches, settings=settings or ShardedDPSettings(),
                          clip=clip)


def moe_fsdp_tp(model: Any, *, dp: int, tp: int, microbatches: int | None = None,
                settings: ShardedDPSettings | None = None,
                megatron_settings: MegatronSettings | None = None) -> Plan:
    """torchtitan's 2-D FSDP x TP on the MoE model, as
    :func:`~spec_lang.plans.sharded_dp.fsdp_tp`: Megatron TP (experts ETP = TP) inside, FSDP over
    dp outside; the seed factors of ``alpha A_r`` are the Megatron context's ``loss_scale``."""
    m = moe_model_of(model, "moe_fsdp_tp")
    dp_pre = Scale("dp", ((DP, 1),), "undoes FSDP's 1/dp average: each token weighs 1/N")
    ms = megatron_settings or MegatronSettings()
    if megatron_settings is None and not microbatches:
        ms = dataclasses.replace(ms, token_count_axes=(DP,), loss_scale=(dp_pre,))
    tp_pl = {k: v for k, v in moe_megatron_placements(m, tp).items() if k in m.params}
    base = settings or ShardedDPSettings(stage=3)
    s = dataclasses.replace(base, loss_prefactor_axes=())
    count_axes = tuple(ms.token_count_axes) + ((TP,) if ms.sp else ())
    ctx = MoEMegatronTP(ms, count_axes)
    enter = [k for k, v in tp_pl.items() if k.split(".", 2)[-1] in _TP_REGION
             and not isinstance(v.get(TP, Replicate()), Shard)] \
        if ms.replicated_weights_enter_tp else []
    dense = MoEAsDense(m, (), (DP, TP) if ms.sp else (DP,), ms.loss_scale, enter, ms.copy_to_tp)
    plan = sharded_dp(dense, mesh=Mesh(dp=dp, tp=tp),  # type: ignore[arg-type]
                      microbatches=microbatches, settings=s, tp_placements=tp_pl, context=ctx,
                      assumption=f"MoE: FSDP over dp{dp} x Megatron TP{tp} (ETP=TP)"
                                 + (f", {microbatches} micro-batches" if microbatches else "")
                                 + ", dense routing; token count N > 0")
    return dataclasses.replace(_drop_non_batch_data(plan, m), site=caller_site())


# -- context parallelism --------------------------------------------------------------------------

class MoECP(MoEContext):
    """Routing counts all-reduced over the token axes ``(cp, dp)``; the rest is the identity
    (the CP plan writes its own attention)."""

    def __init__(self, count_axes: Sequence[str]):
        self.count_axes = tuple(count_axes)

    def routing_count(self, count: Tensor, d: MoEDims) -> Tensor:
        return _all_reduce_over(count, self.count_axes)


def moe_context_parallel(model: MoEModel | MoEConfig | Spec, *, cp: int, dp: int = 1,
                         settings: CPSettings | None = None) -> Plan:
    """Megatron CP x DP (:func:`~spec_lang.plans.context_parallel.context_parallel`) on the MoE
    model: the same load-balanced token map, RoPE tables, causal mask and all-gathered K/V
    (:func:`~spec_lang.plans.context_parallel.cp_attention`); the MoE layer runs on the rank's
    tokens (routing is per token), the routing counts are all-reduced over ``cp x dp`` and
    ``alpha A_r`` is summed like the cross-entropy (the seed has no pre-factor: gradients are
    summed over ``cp x dp``, not averaged).

    Raises:
        PlanError: ``|S|`` not a multiple of ``2 cp``; a model without attention.
    """
    m = moe_model_of(model, "moe_context_parallel")
    s = settings or CPSettings()
    c, d = m.config, m.dims
    if not c.attention:
        raise PlanError(f"{caller_site()}: moe_context_parallel needs attention layers "
                        f"({c.name} has attention=False); use data parallelism")
    dense = llama(c.llama())                     # attention's view (same dims and constants)
    dl: LlamaDims = d.llama

    def forward(p: Params, data: Mapping[str, Tensor]) -> Loss:
        ctx = MoECP(s.token_count_axes)
        tokens = cp_split(data["tokens"], dl.S)
        mask_ = cp_split(data["mask"], dl.S)
        labels = (cp_split(data["labels"], dl.S) if s.label_map == "load_balanced"
                  else _contiguous(data["labels"], dl.S))
        cos, sin = _rope_tables(dl, c.rope_theta, s)
        causal = cp_causal_mask(dl.S, dl.T)
        x = ops.embedding(tokens, p["tok_embeddings"], dl.V)
        aux = None
        for i in range(c.n_layers):
            lp = p.scope(f"layers.{i}")
            h = x + cp_attention(lp.scope("attn"), ops.rms_norm(x, lp["attention_norm"], dl.H,
                                                                c.norm_eps),
                                 dense, cos, sin, causal, s)
            bias = data.get(f"layers.{i}.moe.e_score_correction_bias")
            y, a = moe_layer(lp.scope("moe"), ops.rms_norm(h, lp["ffn_norm"], dl.H, c.norm_eps),
                             c, d, ctx, bias)
            x = h + y
            aux = a if aux is None else aux + a
        x = ops.rms_norm(x, p["norm"], dl.H, c.norm_eps)
        logits = ops.einsum(x, p["output"], out=(dl.B, dl.S, dl.V))
        ce = ops.cross_entropy_per_token(logits, labels, dl.V)
        n_tokens = _all_reduce_over(ops.sum(mask_), s.token_count_axes)
        local = ops.sum(mask_ * ce) / n_tokens
        return _seed_and_report(local, _all_reduce_over(local, (CP, DP)), aux, c, (),
                                (CP, DP))

    def reduce_grads(name: str, g: Tensor) -> Tensor:
        return _all_reduce_over(g, s.grad_reduce_axes)

    pl = {k: {DP: Shard(dl.B)} for k in ("tokens", "labels", "mask")}
    return Plan(mesh=Mesh(dp=dp, cp=cp), placements=pl, forward=forward,
                reduce_grads=reduce_grads,
                assumptions=(f"MoE: Megatron CP{cp} (load-balanced, all-gathered K/V) x DP{dp}, "
                             "dense routing; token count N > 0",),
                site=caller_site())



# -- Megatron's distributed optimizer ------------------------------------------------------------

def distributed_optimizer(model: Any, *, tp: int, dp: int, microbatches: int | None = None,
                          megatron_settings: MegatronSettings | None = None) -> Plan:
    """Megatron-LM TP x DP with the distributed optimizer (``--use-distributed-optimizer``;
    ``megatron/core/optimizer/distrib_optimizer.py``), on a Llama or MoE model.

    The Megatron TP layout and loss factors; parameters replicated over dp; the gradient
    averaged over dp and *reduce-scattered* (each dp rank gets its block along the parameter's
    first dim that tp does not split); AdamW state and the step on that block only; the updated
    blocks all-gathered over dp. That is ZeRO-2's dataflow with Megatron's TP inside:
    :func:`~spec_lang.plans.sharded_dp.fsdp_tp` / :func:`moe_fsdp_tp` at
    ``ShardedDPSettings(stage=2)``. (Megatron's contiguous flat buffer, whose dp shards may cut
    a parameter anywhere, is :class:`~spec_lang.plans.sharded_dp.FlatBuffer`.)
    """
    from spec_lang.plans.sharded_dp import fsdp_tp  # noqa: PLC0415

    is_moe = isinstance(model, (MoEModel, MoEConfig)) or isinstance(
        getattr(getattr(model, "forward", None), "__self__", None), MoEModel)
    fn = moe_fsdp_tp if is_moe else fsdp_tp
    plan = fn(model, dp=dp, tp=tp, microbatches=microbatches,
              settings=ShardedDPSettings(stage=2), megatron_settings=megatron_settings)
    return dataclasses.replace(plan, site=caller_site(),
                               assumptions=(f"Megatron-LM TP{tp} x DP{dp} with the distributed "
                                            "optimizer (gradients reduce-scattered over dp, "
                                            "state and step on the dp block, parameters "
                                            "all-gathered)"
                                            + (f", {microbatches} micro-batches"
                                               if microbatches else "")
                                            + "; token count N > 0",))
