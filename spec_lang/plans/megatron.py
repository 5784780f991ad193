"""Megatron-LM tensor parallelism + data parallelism + gradient accumulation, as an SPMD plan.

The program of one rank on ``Mesh(dp, tp)`` running K micro-batches, after Megatron-LM's
``megatron/core/tensor_parallel`` (``layers.py``, ``mappings.py``, ``cross_entropy.py``) and its
DDP wrapper. The Llama blocks are the model library's own (:mod:`spec_lang.models.llama`); this
module only supplies the :class:`~spec_lang.models.llama.ParallelContext` hooks, the placements,
the gradient reduction and the scale factors.

Layers (``x`` replicated over tp, ``W = [W_1, ..., W_tp]``):

* column-parallel ``Y_r = f(X) W_r`` (wq/wk/wv split by heads, w1/w3 split by ``F``, the head
  split by ``V``): ``f`` = ``copy_to_tp_region``, identity forward, all-reduce backward (each
  rank's ``dX`` is a partial sum over its column block);
* row-parallel ``Y = g(sum_r X_r W_r)`` (wo split by heads, w2 by ``F``): ``g`` =
  ``reduce_from_tp_region``, all-reduce forward, identity backward;
* vocab-parallel embedding: a masked lookup in the rank's ``V`` block (``one_hot`` over the local
  vocab range: tokens outside it give a zero row), then ``g``;
* vocab-parallel cross-entropy on ``V``-sharded logits ``z``: ``m = all_reduce_max(max_local z)``
  (stop-gradient: it cancels), ``sum_exp = g(sum_local exp(z - m))``, ``z_y = g(sum_local z *
  onehot_local(y))``, ``ce = m + log(sum_exp) - z_y``; ``g``'s identity backward gives each rank
  ``softmax_local - onehot_local`` as in Megatron's hand-written backward.

Attention heads: query heads are ``(KVH, G)`` (``G`` query heads per KV head). With
``kv_heads % tp == 0`` wq/wk/wv/wo shard ``KVH``. With ``kv_heads < tp`` the KV projections are
replicated and the query-head groups ``G`` are split instead (``G % tp == 0``); a replicated
weight used inside the TP region enters it through ``copy_to_tp_region`` on the *weight*, whose
all-reduce backward sums the rank's partial gradient (each rank only back-propagates its own
query heads into K and V).

Loss and gradients (every scale factor is a named :class:`Scale` with its reason; none is
inferred): the spec loss is the masked token mean ``L = S / N`` over the global batch. Each
rank's micro-batch loss is ``dp * K / N * S_mb`` (:data:`LOSS_PREFACTOR`) with ``N`` the token
count all-reduced over the K micro-batches and dp (counted before the micro-batch loop), divided
by ``K`` as Megatron's ``forward_step`` does (:data:`GRAD_ACCUM`, ``1/K``): that is the backward
seed. The K gradients are summed; DDP scales by ``1/dp`` (:data:`DP_AVERAGE`, Megatron's
``gradient_scaling_factor``) and all-reduces (sum) over dp. The product of the three is ``1/N``
per token. AdamW then runs on the local shards.

Sequence parallelism (``MegatronSettings(sp=True)``, Korthikanti et al. 2022, "Reducing
Activation Recomputation in Large Transformer Models", section 4.2.2; Megatron's
``sequence_parallel``): outside the TP regions the residual stream is Shard(S) over tp, so the
norms run on the rank's ``S/tp`` tokens. ``f`` becomes ``gather_from_sp_region`` (all-gather S,
backward reduce-scatter S), ``g`` becomes ``reduce_scatter_to_sp_region`` (reduce-scatter S,
backward all-gather S), the embedding's ``g`` reduce-scatters into S shards and the head input
is all-gathered (the head is column-parallel, so its backward reduce-scatters the partial input
gradients). A replicated weight used on sequence shards (the RMSNorm weights) gets a local
gradient summed over the rank's tokens only: it is ``Partial(sum)`` over tp, and
``reduce_grads`` all-reduces it over tp (Megatron's ``_allreduce_layernorm_grads``). Which
gradients are Partial is *derived*: the parameter is ``Replicate()`` on tp and its traced local
gradient varies over tp (:func:`partial_grad_axes`); no per-parameter flag is consulted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from spec_lang import ops
from spec_lang.collectives import all_reduce, region
from spec_lang.errors import PlanError
from spec_lang.mesh import Mesh
from spec_lang.models.llama import LlamaConfig, LlamaDims, LlamaModel, ParallelContext, llama
from spec_lang.models.protocol import caller_site, colwise, model_of, replicated, rowwise, \
    tp_placements
from spec_lang.placement import Placement, Replicate, Shard
from spec_lang.plan import Loss, Plan, microbatches as _microbatches
from spec_lang.plans.clipping import grad_norm_sq_fn
from spec_lang.spec import Params, Spec
from spec_lang.tensor import Tensor, user_site
from spec_lang.term import Axis, varying_axes

__all__ = [
    "Scale", "GRAD_ACCUM", "DP_AVERAGE", "LOSS_PREFACTOR", "COPY_TO_TP", "REDUCE_FROM_TP",
    "GATHER_FROM_TP", "GATHER_FROM_SP", "REDUCE_SCATTER_TO_SP", "partial_grad_axes",
    "MegatronSettings", "MegatronTP", "megatron", "megatron_placements", "layer_plan",
    "colwise", "rowwise", "replicated", "vocab_parallel_embedding",
    "vocab_parallel_cross_entropy", "TP_REGION_WEIGHTS", "region_entries",
]

TP, DP, MB = Axis.TP, Axis.DP, Axis.MB


# -- scale factors: explicit plan data ------------------------------------------------------------

@dataclass(frozen=True)
class Scale:
    """A scale factor ``prod(|axis| ** power)``, with the reason it is in the plan.

    ``Scale("1/dp", (("dp", -1),), "...")`` is ``RECIP(AXIS_SIZE(dp))``: the mesh size stays a
    symbol, so the prover has to cancel it against the loss pre-factor, never assume it.
    """

    name: str
    powers: tuple[tuple[str, int], ...]
    reason: str

    def tensor(self) -> Tensor:
        """The factor as a scalar term (``1`` when ``powers`` is empty)."""
        out: Tensor | None = None
        for axis, k in self.powers:
            base = ops.axis_size(axis)
            f = base if k > 0 else ops.recip(base)
            for _ in range(abs(k)):
                out = f if out is None else out * f
        return out if out is not None else ops.const(1)


GRAD_ACCUM = Scale("1/K", ((MB, -1),),
                   "gradient accumulation: Megatron's forward_step divides each micro-batch "
                   "loss by num_microbatches K; the K gradients are then summed")
DP_AVERAGE = Scale("1/dp", ((DP, -1),),
                   "data parallelism: DDP averages the replicas' gradients (Megatron scales "
                   "by gradient_scaling_factor 1/dp, then all-reduces with sum)")
LOSS_PREFACTOR = Scale("dp*K", ((DP, 1), (MB, 1)),
                       "loss pre-factor: each micro-batch's loss is dp*K/N times its masked "
                       "loss sum, undoing 1/K and 1/dp so every token weighs 1/N, N the global "
                       "token count")


def _scaled(x: Tensor, scales: tuple[Scale, ...]) -> Tensor:
    for s in scales:
        x = s.tensor() * x
    return x


# -- regions (Megatron's f and g), declared as (forward, backward) ----------------------------------

COPY_TO_TP = ("identity", "all_reduce")
"""Megatron's ``f`` (``copy_to_tensor_model_parallel_region``): enter a TP region."""
REDUCE_FROM_TP = ("all_reduce", "identity")
"""Megatron's ``g`` (``reduce_from_tensor_model_parallel_region``): leave a TP region."""
GATHER_FROM_SP = ("all_gather", "reduce_scatter")
"""Megatron's ``gather_from_sequence_parallel_region``: enter a TP region from sequence shards."""
REDUCE_SCATTER_TO_SP = ("reduce_scatter", "all_gather")
"""Megatron's ``reduce_scatter_to_sequence_parallel_region``: leave a TP region into S shards."""


# -- the knobs of the plan (all of it plan data) ----------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class MegatronSettings:
    """Everything the Megatron plan decides besides the mesh; the defaults are Megatron's.

    Regions are ``(forward, declared backward)`` primitive pairs (``spec_lang.collectives``).

    Attributes:
        copy_to_tp: ``f`` before column-parallel layers (attention, MLP, head) and on
            replicated weights used inside a TP region.
        row_parallel_reduce: ``g`` after the row-parallel wo and w2.
        embedding_reduce: ``g`` after the vocab-parallel embedding's masked lookup.
        loss_reduce: ``g`` on the vocab-parallel cross-entropy's sum-exp and target logit.
        gather_logits: ``None`` for the vocab-parallel cross-entropy; a region pair to
            all-gather the logits over ``V`` instead and compute the full cross-entropy on every
            rank (Megatron's ``parallel_output=False``; Megatron's pairing is all_gather/split).
        row_parallel_scale: factors applied after the row-parallel reduction (none: a sum).
        loss_scale: factors on each micro-batch's masked loss sum (besides ``1/N``): the
            pre-factor and Megatron's ``1/num_microbatches``.
        grad_scale: factors on the gradient after the micro-batch sum, before the dp
            all-reduce (DDP's ``gradient_scaling_factor``).
        grad_reduce_axes: the group the gradient is all-reduced over (dp).
        token_count_axes: the axes ``N`` is all-reduced over (micro-batches, then dp).
        replicated_weights_enter_tp: a replicated weight used inside a TP region (the KV
            projections when ``kv_heads < tp``) enters it through ``copy_to_tp``.
        sp: Megatron sequence parallelism: the residual stream and the norms are Shard(S)
            over tp between TP regions.
        gather_from_sp: with ``sp``, the region replacing ``f`` before column-parallel layers
            and the head (all-gather S; declared backward reduce-scatter S).
        reduce_scatter_to_sp: with ``sp``, the region replacing ``g`` after row-parallel
            layers and the embedding (reduce-scatter S; declared backward all-gather S).
        sp_dim: the dim the sequence shards split (default the model's ``S``).
        sp_grad_reduce_axes: with ``sp``, the all-reduces (sum), in order, applied to every
            gradient that is Partial over tp (see :func:`partial_grad_axes`); Megatron: one
            over tp.
    """

    copy_to_tp: tuple[str, str] = COPY_TO_TP
    row_parallel_reduce: tuple[str, str] = REDUCE_FROM_TP
    embedding_reduce: tuple[str, str] = REDUCE_FROM_TP
    loss_reduce: tuple[str, str] = REDUCE_FROM_TP
    gather_logits: tuple[str, str] | None = None
    row_parallel_scale: tuple[Scale, ...] = ()
    loss_scale: tuple[Scale, ...] = (LOSS_PREFACTOR, GRAD_ACCUM)
    grad_scale: tuple[Scale, ...] = (DP_AVERAGE,)
    grad_reduce_axes: tuple[str, ...] = (DP,)
    token_count_axes: tuple[str, ...] = (MB, DP)
    replicated_weights_enter_tp: bool = True
    sp: bool = False
    gather_from_sp: tuple[str, str] = GATHER_FROM_SP
    reduce_scatter_to_sp: tuple[str, str] = REDUCE_SCATTER_TO_SP
    sp_dim: str | None = None
    sp_grad_reduce_axes: tuple[str, ...] = (TP,)


GATHER_FROM_TP = ("all_gather", "split")
"""Megatron's ``gather_from_tensor_model_parallel_region``: all-gather forward, split backward."""


# -- vocab-parallel embedding and cross-entropy ---------------------------------------------------

def vocab_parallel_embedding(tokens: Tensor, table: Tensor, d: LlamaDims,
                             reduce: tuple[str, str] = REDUCE_FROM_TP) -> Tensor:
    """Megatron's ``VocabParallelEmbedding``: ``g(onehot_local(tokens) @ table_r)``.

    tokens: (B, S) ids in [0, V); table: (V[tp], H), the rank's vocab block. A token outside the
    rank's block has an all-zero local one-hot row (the masked lookup); ``g`` sums the ranks'
    rows. Returns (B, S, H), replicated over tp.
    """
    local = ops.embedding(tokens, table, d.V)                # (B, S, H), Partial(sum) over tp
    return region(local, "reduce_from_tp", *reduce, TP)


def vocab_parallel_cross_entropy(logits: Tensor, labels: Tensor, d: LlamaDims,
                                 reduce: tuple[str, str] = REDUCE_FROM_TP) -> Tensor:
    """Per-token cross-entropy on vocab-sharded logits (Megatron's ``vocab_parallel_cross_entropy``).

    logits: (B, S, V[tp]); labels: (B, S). ``ce = m + log(g(sum_local exp(z - m))) -
    g(sum_local z onehot_local(y))`` with ``m`` the all-reduced max (stop-gradient: ``m`` cancels
    exactly, so its derivative is zero). Returns (B, S), replicated over tp.
    """
    m = ops.stop_gradient(all_reduce(ops.max(logits, d.V), TP, "max"))      # (B, S)
    sum_exp = region(ops.sum(ops.exp(logits - m), d.V), "reduce_from_tp", *reduce, TP)
    target = ops.einsum(logits, ops.one_hot(labels, d.V, shards=(str(TP),)),
                        out=(d.B, d.S))                                      # (B, S), partial
    target = region(target, "reduce_from_tp", *reduce, TP)
    return m + ops.log(sum_exp) - target


# -- the parallel context: Megatron's hooks in the Llama blocks -----------------------------------

class MegatronTP(ParallelContext):
    """Megatron TP hooks for :func:`spec_lang.models.llama.llama_forward`.

    One instance per traced micro-batch: :meth:`loss` records the reported loss in
    ``self.report`` (the backward seed and the reported value differ by the scale factors).
    """

    def __init__(self, settings: MegatronSettings):
        self.s = settings
        self.report: Tensor | None = None

    def _sp_dim(self, d: LlamaDims) -> Any:
        return self.s.sp_dim if self.s.sp_dim is not None else d.S

    def enter_tp(self, x: Tensor, d: LlamaDims) -> Tensor:
        """``f``: x (B, S, H) replicated -> the same, with an all-reduce in backward.

        With ``sp``: x (B, S[tp], H) -> (B, S, H) by ``gather_from_sp_region``.
        """
        if self.s.sp:
            return region(x, "gather_from_sp", *self.s.gather_from_sp, TP, self._sp_dim(d))
        return region(x, "copy_to_tp", *self.s.copy_to_tp, TP)

    def exit_tp(self, x: Tensor, d: LlamaDims) -> Tensor:
        """``g``: x (B, S, H) Partial(sum) over tp -> replicated.

        With ``sp``: (B, S, H) Partial(sum) -> (B, S[tp], H) by ``reduce_scatter_to_sp_region``.
        """
        if self.s.sp:
            y = region(x, "reduce_scatter_to_sp", *self.s.reduce_scatter_to_sp, TP,
                       self._sp_dim(d))
        else:
            y = region(x, "reduce_from_tp", *self.s.row_parallel_reduce, TP)
        return _scaled(y, self.s.row_parallel_scale)

    def embed(self, tokens: Tensor, table: Tensor, d: LlamaDims) -> Tensor:
        """Vocab-parallel embedding; with ``sp`` its Partial output is reduce-scattered into
        sequence shards (B, S[tp], H) (Megatron's ``VocabParallelEmbedding`` with
        ``reduce_scatter_embeddings``)."""
        if self.s.sp:
            local = ops.embedding(tokens, table, d.V)        # (B, S, H), Partial(sum) over tp
            return region(local, "reduce_scatter_to_sp", *self.s.reduce_scatter_to_sp, TP,
                          self._sp_dim(d))
        return vocab_parallel_embedding(tokens, table, d, self.s.embedding_reduce)

    def positions(self, table: Tensor, d: Any) -> Tensor:
        """A learned position table ``(S, H)`` on its way into the residual stream (GPT-2):
        replicated; with ``sp`` the rank's sequence block, by Megatron's
        ``scatter_to_sequence_parallel_region`` (split forward, all-gather backward), as
        ``LanguageModelEmbedding`` scatters word + position embeddings."""
        if self.s.sp:
            return region(table, "scatter_to_sp", "split", "all_gather", TP, self._sp_dim(d))
        return table

    def head_input(self, x: Tensor, d: LlamaDims) -> Tensor:
        """The output head is column-parallel over ``V``: it enters the TP region too (with
        ``sp``: all-gather S; the backward reduce-scatters the ranks' partial input grads)."""
        return self.enter_tp(x, d)

    def loss(self, logits: Tensor, labels: Tensor, mask_: Tensor, d: LlamaDims) -> Tensor:
        """The backward seed ``(1/K) * dp*K/N * sum(mask * ce)``; records the reported ``S/N``.

        logits: (B[dp,mb], S, V[tp]); labels, mask: (B[dp,mb], S).
        """
        if self.s.gather_logits is None:
            ce = vocab_parallel_cross_entropy(logits, labels, d, self.s.loss_reduce)
        else:                                                 # (B, S, V[tp]) -> (B, S, V)
            full = region(logits, "gather_from_tp", *self.s.gather_logits, TP, d.V)
            ce = ops.cross_entropy_per_token(full, labels, d.V)
        masked_sum = ops.sum(mask_ * ce)                      # S_mb: this micro-batch, this rank
        n_tokens = ops.sum(mask_)                             # counted over all K micro-batches
        for axis in self.s.token_count_axes:                  # and all dp ranks, before the loop
            n_tokens = all_reduce(n_tokens, axis)
        self.report = all_reduce(masked_sum, DP) / n_tokens   # summed over mb by the plan
        return _scaled(masked_sum, self.s.loss_scale) / n_tokens


# -- gradient typing: which replicated weights have Partial gradients ----------------------------

def grad_reducer(s: MegatronSettings, pl: Mapping[str, Mapping[str, Placement]]
                 ) -> Callable[[str, Tensor], Tensor]:
    """Megatron's gradient reduction as ``Plan(reduce_grads=...)``: with SP, the tp all-reduce
    of a replicated weight's Partial[tp] gradient (``partial_grad_axes``); then the DDP scale
    ``s.grad_scale`` and the all-reduce (sum) over ``s.grad_reduce_axes``. ``g`` arrives
    already summed over the micro-batches.

    Args:
        s: the settings (scales and axes are plan data).
        pl: parameter placements (name -> axis -> placement).
    """
    def reduce_grads(name: str, g: Tensor) -> Tensor:
        if s.sp and partial_grad_axes(g, pl.get(name, {})):
            for axis in s.sp_grad_reduce_axes:
                g = all_reduce(g, axis)
        g = _scaled(g, s.grad_scale)
        for axis in s.grad_reduce_axes:
            g = all_reduce(g, axis)
        return g

    return reduce_grads


def partial_grad_axes(g: Tensor, placement: Mapping[str, Placement],
                      axes: tuple[str, ...] = (TP,)) -> tuple[str, ...]:
    """The axes among ``axes`` over which local gradient ``g`` is ``Partial(sum)``.

    A parameter that is ``Replicate()`` on axis ``a`` but whose traced local gradient varies over
    ``a`` was used on ``a``-sharded activations (the sequence shards of SP): each rank holds the
    sum over its own tokens only, so the gradient must be summed over ``a`` exactly once. A
    parameter ``Shard``-ed on ``a`` varies over ``a`` by its placement and is complete.
    Derived from the placement and the traced term (``varying_axes``), never from a flag.

    Args:
        g: the local gradient (after micro-batch accumulation).
        placement: the parameter's ``{axis: Placement}`` (missing axis: ``Replicate()``).
        axes: the mesh axes to inspect.
    """
    v = varying_axes(g.term)
    return tuple(a for a in axes
                 if a in v and not isinstance(placement.get(a, Replicate()), Shard))


# -- placements (torchtitan-style named layouts: spec_lang.models.protocol) -------------------------

TP_REGION_WEIGHTS = LlamaModel.tp_region_weights
"""The Llama layer weights consumed inside a TP region (between ``f`` and ``g``)."""


def region_entries(model: Any, pl: Mapping[str, Mapping[str, Placement]]) -> list[str]:
    """Parameters that are *replicated* over tp but consumed inside a TP region (the model's
    ``tp_region_weights``, e.g. Llama's KV projections when ``kv_heads < tp``): they enter it
    through Megatron's ``f`` so that their partial gradients are all-reduced over tp."""
    names = getattr(model, "tp_region_weights", ())
    return [k for k, v in pl.items() if k in model.params and k.split(".", 2)[-1] in names
            and not isinstance(v.get(TP, Replicate()), Shard)]


def layer_plan(config: LlamaConfig, tp: int) -> dict[str, dict[str, Placement]]:
    """Per-layer placements of a Llama config over tp: :meth:`LlamaModel.tp_layer_plan` (heads
    split over tp, KV heads when ``kv_heads % tp == 0``, else the query groups ``G`` with
    replicated KV projections; ``F`` split for the MLP).

    Raises:
        PlanError: neither the KV heads nor the query groups divide over tp.
    """
    return llama(config).tp_layer_plan(tp)


def megatron_placements(model: Any, tp: int,
                        layers: Mapping[str, Mapping[str, Placement]] | None = None
                        ) -> dict[str, dict[str, Placement]]:
    """Placements of every parameter (the model's ``tp_layer_plan`` / ``tp_outer_plan``) and
    data input (``Shard(B)`` over dp); axes absent from a map: Replicate."""
    return tp_placements(model, tp, layers)


# -- the plan -------------------------------------------------------------------------------------

def megatron(model: Any, *, tp: int, dp: int, microbatches: int,
             layers: Mapping[str, Mapping[str, Placement]] | None = None,
             settings: MegatronSettings | None = None, sp: bool | None = None) -> Plan:
    """Megatron-LM TP x DP with K micro-batches of gradient accumulation and AdamW.

    Args:
        model: a model following :mod:`spec_lang.models.protocol` (Llama, GPT-2, Qwen2, your
            own), its config, or a spec from ``model.spec``. An MoE model goes to
            :func:`spec_lang.plans.library.moe_megatron`.
        tp, dp: mesh sizes (``Mesh(dp=dp, tp=tp)``).
        microbatches: K, splitting each dp rank's batch ``B`` (``B % (dp * K) == 0``).
        layers: per-layer placements (default :func:`layer_plan`), keyed ``"attn.wq"``.
        settings: the plan's regions and scale factors (default: Megatron's).
        sp: sequence parallelism on or off (overrides ``settings.sp``; see the module
            docstring). With ``sp`` the sequence length must divide by tp.

    Returns:
        the :class:`~spec_lang.plan.Plan`; the spec's optimizer runs on the local shards. When
        the spec clips gradients, the global norm is
        :func:`spec_lang.plans.clipping.global_grad_norm_sq` (sharded gradients summed over
        tp, replicated ones counted once).
    """
    site = caller_site()
    m = model_of(model, "megatron()", site)
    from spec_lang.models.moe import MoEModel  # noqa: PLC0415

    if isinstance(m, MoEModel):
        from spec_lang.plans.library import moe_megatron  # noqa: PLC0415

        return replace(moe_megatron(m, tp=tp, dp=dp, microbatches=microbatches,
                                    sp=bool(sp if sp is not None else (settings or
                                                                       MegatronSettings()).sp),
                                    layers=layers, settings=settings), site=site)
    s = settings or MegatronSettings()
    if sp is not None:
        s = replace(s, sp=sp)
    pl = megatron_placements(m, tp, layers)
    enter_weights = region_entries(m, pl) if s.replicated_weights_enter_tp else []

    def forward(p: Params, data: Mapping[str, Tensor]) -> Loss:
        if enter_weights:
            ts = {k: p[k] for k in p}
            for k in enter_weights:
                ts[k] = region(ts[k], "copy_to_tp", *s.copy_to_tp, TP)
            p = Params(ts)
        ctx = MegatronTP(s)
        seed = m.forward(p, data, ctx)
        assert ctx.report is not None
        return Loss(backward=seed, report=ctx.report)

    reduce_grads = grad_reducer(s, pl)
    mesh = Mesh(dp=dp, tp=tp)
    return Plan(mesh=mesh, placements=pl, forward=forward,
                reduce_grads=reduce_grads, grad_norm_sq=grad_norm_sq_fn(mesh=mesh), microbatches=_microbatches(microbatches, m.dims.B),
                assumptions=(f"Megatron-LM TP{tp}{'+SP' if s.sp else ''} x DP{dp}, "
                             f"{microbatches} micro-batches; "
                             "token count N > 0",),
                site=site)

