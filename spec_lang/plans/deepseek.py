"""DeepSeek-V3's training parallelism: PP x EP x ZeRO-1 DP, no TP, with micro-batches.

DeepSeek-V3 technical report (arXiv 2412.19437), sec. 3.2: "16-way Pipeline Parallelism (PP),
64-way Expert Parallelism (EP) spanning 8 nodes, and ZeRO-1 Data Parallelism (DP)", no tensor
parallelism, on 2048 H800 GPUs: 2048 / 16 stages = 128 ranks per stage = ep 64 x dp 2.

**Mesh** ``Mesh(pp, dp, ep)``. One rank ``(s, i, j)`` runs pipeline stage ``s``; inside a stage
the 128 ranks are all data-parallel for the non-expert parameters (each holds its own block of
the batch: tokens ``Shard(B)`` over ``(dp, ep)``) and the routed experts are ``Shard(E)`` over
``ep`` (rank ``j`` owns ``E / ep`` experts of every MoE layer of its stage; 256 / 64 = 4).

**Per MoE layer** (DeepSeek-V3 sec. 3.2.2, Megatron's ``MoEAlltoAllTokenDispatcher``): routing
on the rank's tokens (the top-k acts along ``E`` only); *dispatch* = the dispatcher's token
permutation (a fixed block order along ``S``, standing for the sort by expert) then
``all_to_all_region`` over ``ep`` (split ``E``, concatenate the token dim ``B``: tokens
``Shard(B)`` -> experts ``Shard(E)``); the rank's experts run on every token of its ep group;
*combine* = the reverse all-to-all then the inverse permutation, then the gate-weighted sum; the
shared expert runs on the local tokens. The declared backward of each all-to-all is the reverse
all-to-all.

**Micro-batches** (``microbatches(K, B)``): a rank's tokens of micro-batch ``m`` are one block
of the global batch, typed ``B[dp, mb, ep]``: the data loader hands data-parallel rank ``i``
its ``B / dp`` sequences, split into ``K`` micro-batches (``Plan.microbatches``: the innermost
split of the plan's placements), and each of the ``ep`` ranks of that group loads its own
``1 / ep`` of the micro-batch (``rank_batch``: ``SHARD(x, B, ep)`` of a data input, an index
computation of the sampler, not a collective). The dispatch all-to-all then concatenates the
micro-batch's blocks of the ep group (innermost shard ``ep``: well typed), so each rank's
experts see the tokens of micro-batch ``m`` of its whole ep group. Which sequences form which
(rank, micro-batch) block is the sampler's choice; the spec's loss is a sum over the whole
batch, so every fixed partition of ``B`` into ``dp K ep`` blocks is an exact data loader.

**Pipeline** (:mod:`spec_lang.pipeline`, :mod:`spec_lang.schedules`): the layers are cut into
``pp`` stages (:func:`deepseek_layer_split`); stage 0 also holds the embedding, the last stage
the final norm, the output head and the loss (and the multi-token-prediction module when the
model has one); activations move by ``send`` / ``recv``; each stage's gradient is the
loop-carried buffer of its 1F1B event order (``one_f_one_b(pp, K)``), i.e. ``sum_m g_m`` with
exact coefficients, before ``reduce_grads``. Each MoE layer's load-balancing term
``alpha A_l`` is added to the loss on the stage that computes it (Megatron's
``MoEAuxLossAutoScaler``: the aux gradient never crosses a stage boundary).

**DualPipe** (DeepSeek-V3 sec. 3.2.1) is not expressed: the schedule machinery places virtual
stage ``j`` on physical stage ``j mod pp``, while DualPipe places two model chunks ``j`` and
``2 pp - 1 - j`` on one device (a V shape), keeps two copies of the parameters and feeds
micro-batches from both ends. The plan runs 1F1B instead. This does not change the gradient:
over the reals each buffer is ``sum_m c_m g_m`` (:func:`spec_lang.schedules.buffer_after`), and
a schedule that runs ``F(m)`` and ``B(m)`` exactly once for every micro-batch, with no buffer
hook before the last backward, gives ``c_m = 1`` for every ``m`` whatever the order of the
events or the direction a micro-batch travels; DualPipe's two parameter copies each hold
``sum`` over the micro-batches of their direction and are summed before the step, which is
again ``sum_m g_m`` (addition is commutative and associative over the reals). What DualPipe
changes (overlap of computation and communication, the bubble, memory) is not a value.

**Loss and scale factors** (Megatron's named :class:`~spec_lang.plans.megatron.Scale` s).
The spec objective is ``L = S / N + alpha sum_l A_l`` (token mean over the global batch, ``A_l``
the load-balancing loss of layer ``l``). Rank ``r``'s micro-batch holds ``S_r / N`` (``N`` the
global token count, all-reduced over ``mb``, ``dp`` and ``ep`` before the loop) and ``A_r``,
its addend of ``A`` (global routing counts; the local router probabilities over the global token
count), both Partial over ``(mb, dp, ep)``. Each micro-batch's seed is
``dp ep K (S_r / N + alpha A_r) / K`` (:data:`LOSS_PREFACTOR`, :data:`AUX_PREFACTOR`,
Megatron's ``1 / num_microbatches`` :data:`~spec_lang.plans.megatron.GRAD_ACCUM`), the schedule
sums the ``K`` micro-batch gradients, and the data-parallel average applies ``1 / (dp ep)``
(:data:`GRAD_SCALE`, Megatron's ``gradient_scaling_factor`` and, for experts,
``expert_gradient_scaling_factor``: both ``1 / data_parallel_size``, the full 128-rank group).

**ZeRO-1** (Rajbhandari et al., SC'20, sec. 5.1 ``P_os``; Megatron's distributed optimizer):
the parameters stay whole on every rank of their stage; the optimizer state and the update of
each parameter live on the rank's owned block:

* dense parameters: owned block ``Shard(d)`` over ``(dp, ep)`` (``d`` the first dim 128
  divides); gradient ``1 / (dp ep)`` then ``reduce_scatter`` over dp then ep; after the step
  ``all_gather`` over ep then dp rebuilds the parameter;
* expert parameters (``Shard(E)`` over ep): their data-parallel group is dp only (the rank's
  experts already saw every token of its ep group through the all-to-all), so the owned block is
  ``Shard(d)`` over dp (``d`` a dim other than ``E``); ``reduce_scatter`` over dp, ``all_gather``
  over dp. Reducing them over ep as well would add other experts' gradients (a mutant).

Models: the DeepSeek-style :class:`~spec_lang.models.moe.MoEModel` (every layer MoE) and the
DeepSeek-V3 model of :mod:`spec_lang.models.deepseek` (dense leading layers, MLA, MoE layers,
MTP) when present; the stage code calls the models' own block functions, which mark the layer
boundaries.

Limits: routing is dense (no capacity factor, no token dropping); the token permutation is a
fixed block order, not the data-dependent sort; DualPipe is modelled as 1F1B (above); with the
MoE model's *batch-wise* aux loss the routing counts are all-reduced over ``mb`` as well (the
count over the whole global batch: a pre-pass a 1F1B pipeline does not run; DeepSeek-V3's own
sequence-wise balance loss needs no count across micro-batches).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from spec_lang import ops
from spec_lang.collectives import all_gather, all_reduce, all_to_all_region, reduce_scatter, region
from spec_lang.cp import permute
from spec_lang.errors import PlanError
from spec_lang.mesh import Mesh
from spec_lang.models.deepseek import DeepSeekContext
from spec_lang.models.moe import MoEConfig, MoEModel, moe, moe_block
from spec_lang.pipeline import Pipeline, stage
from spec_lang.placement import Placement, Shard
from spec_lang.plan import Loss, Plan, microbatches as _microbatches
from spec_lang.plans.clipping import global_grad_norm_sq
from spec_lang.plans.megatron import GRAD_ACCUM, Scale
from spec_lang.plans.sharded_dp import shard_dims
from spec_lang.schedules import gpipe, one_f_one_b
from spec_lang.spec import Params, Spec
from spec_lang.tensor import Tensor, user_site
from spec_lang.term import Axis

__all__ = ["DeepSeekParallelSettings", "DeepSeekEP", "deepseek_v3_parallel", "deepseek_layer_split",
           "rank_batch", "LOSS_PREFACTOR", "AUX_PREFACTOR", "GRAD_SCALE", "EXPERT_SUFFIXES"]

PP, DP, EP, MB = Axis.PP, Axis.DP, Axis.EP, Axis.MB

EXPERT_SUFFIXES = ("moe.experts.w1", "moe.experts.w3", "moe.experts.w2")
"""Per-layer routed-expert weights (``Shard(E)`` over ep)."""

LOSS_PREFACTOR = Scale("dp*ep*K", ((DP, 1), (EP, 1), (MB, 1)),
                       "undoes 1/K and the gradient average over the data-parallel group "
                       "dp x ep: every token weighs 1/N")
AUX_PREFACTOR = Scale("dp*ep*K", ((DP, 1), (EP, 1), (MB, 1)),
                      "the aux addend A_r is Partial over mb x dp x ep and is averaged with the "
                      "gradients: pre-multiply by the group sizes (CASES.md B28)")
GRAD_SCALE = Scale("1/(dp*ep)", ((DP, -1), (EP, -1)),
                   "the data-parallel average over the 128-rank group dp x ep (Megatron: "
                   "1/data_parallel_size, the same for expert gradients)")


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeepSeekParallelSettings:
    """What the plan decides besides the mesh (plan data; the defaults are the correct plan).

    Attributes:
        loss_scale / aux_scale: factors on each micro-batch's ``S_r / N`` and ``alpha A_r``.
        grad_scale / expert_grad_scale: factors on the accumulated gradients.
        dense_grad_axes / expert_grad_axes: the groups gradients are summed over.
        dense_zero_axes / expert_zero_axes: the groups the ZeRO-1 owned block is split over
            (an axis in both lists is a ``reduce_scatter``; only in the zero list: the rank
            keeps its block of the unreduced gradient; only in the grad list: ``all_reduce``).
        gather_axes: axes the updated owned blocks are all-gathered over (innermost first is
            automatic); an axis missing leaves the parameter's type wrong (a PlanError).
        token_order: the dispatcher's block permutation along ``S`` (None: none).
        unpermute: the combine applies the inverse permutation.
        exchange: ``"all_to_all"`` (dispatch / combine over ep) or ``"all_gather"`` (a mutant:
            each rank sends its tokens to its own experts only and all-gathers the expert
            outputs over E: no token exchange).
        bias: ``"select"`` (the auxiliary-loss-free bias used for selection only) or
            ``"none"`` (ignored: a mutant).
        schedule: ``"1f1b"`` or ``"gpipe"``.
        aux_on_stage: add each layer's ``alpha A_l`` to the loss (False drops it: a mutant).
        count_axes: axes the routing counts and ``N`` are all-reduced over.
        tied_reduce: all-reduce a tied parameter's gradient (the embedding shared by stage 0
            and the MTP module on the last stage) over ``pp`` (False: a mutant).
    """

    loss_scale: tuple[Scale, ...] = (LOSS_PREFACTOR, GRAD_ACCUM)
    aux_scale: tuple[Scale, ...] = (AUX_PREFACTOR, GRAD_ACCUM)
    grad_scale: tuple[Scale, ...] = (GRAD_SCALE,)
    expert_grad_scale: tuple[Scale, ...] = (GRAD_SCALE,)
    dense_grad_axes: tuple[str, ...] = (DP, EP)
    expert_grad_axes: tuple[str, ...] = (DP,)
    dense_zero_axes: tuple[str, ...] = (DP, EP)
    expert_zero_axes: tuple[str, ...] = (DP,)
    gather_axes: tuple[str, ...] = (DP, EP)
    token_order: tuple[int, ...] | None = (1, 0)
    unpermute: bool = True
    exchange: str = "all_to_all"
    bias: str = "select"
    schedule: str = "1f1b"
    aux_on_stage: bool = True
    count_axes: tuple[str, ...] = (EP, MB, DP)
    tied_reduce: bool = True


def _scaled(x: Tensor, scales: Sequence[Scale]) -> Tensor:
    for s in scales:
        x = s.tensor() * x
    return x


def rank_batch(x: Tensor, dim: Any, axis: Any = EP) -> Tensor:
    """This rank's block of a data input along the batch dim: ``(.., B[..]) -> (.., B[.., ep])``.

    The sampler's choice of which sequences an ep rank loads (``SHARD`` of an input: no
    communication, no gradient). Used under micro-batches so that the ep split is the innermost
    shard of ``B`` (the all-to-all concatenates it)."""
    return region(x, "rank_batch", "split", "split", axis, dim)


class DeepSeekEP(DeepSeekContext):
    """MoE hooks of one rank: all-to-all dispatch / combine over ``ep``, global counts, loss.

    ``seq_routing_count`` (DeepSeek-V3's sequence-wise balance loss) stays the identity: no
    sequence is split (no CP), so a rank holds whole sequences."""

    def __init__(self, settings: DeepSeekParallelSettings):
        self.s = settings

    def _global(self, x: Tensor) -> Tensor:
        for a in self.s.count_axes:
            x = all_reduce(x, a)
        return x

    def dispatch(self, xe: Tensor, d: Any) -> Tensor:
        if self.s.token_order is not None:
            xe = permute(xe, d.S, self.s.token_order)          # sort tokens (by expert)
        if self.s.exchange == "all_gather":                     # mutant: no token exchange
            return region(xe, "local_experts", "split", "all_gather", EP, d.E)
        return all_to_all_region(xe, EP, d.E, d.B)      # tokens Shard(B) -> experts Shard(E)

    def combine(self, ye: Tensor, d: Any) -> Tensor:
        if self.s.exchange == "all_gather":
            ye = region(ye, "gather_experts", "all_gather", "split", EP, d.E)
        else:
            ye = all_to_all_region(ye, EP, d.B, d.E)            # back to the tokens' ranks
        if self.s.token_order is not None and self.s.unpermute:
            order = self.s.token_order
            ye = permute(ye, d.S, tuple(order.index(j) for j in range(len(order))))
        return ye

    def routing_count(self, count: Tensor, d: Any) -> Tensor:
        return self._global(count)                               # f_e over the global batch
                                                                 # (MoE model's batch-wise loss)

    def loss(self, logits: Tensor, labels: Tensor, mask_: Tensor, d: Any) -> Tensor:
        n = self._global(ops.sum(mask_))                         # global token count N
        return ops.sum(mask_ * ops.cross_entropy_per_token(logits, labels, d.V)) / n   # S_r / N


def deepseek_layer_split(n_layers: int, pp: int,
                         counts: Sequence[int] | None = None) -> list[range]:
    """Consecutive layers of each pipeline stage.

    DeepSeek does not publish its split. Default: ``per = ceil(n_layers / pp)`` layers on each
    stage from the first, the remainder (at least one layer) on the last stage, which also holds
    the final norm, the head and the MTP module. For DeepSeek-V3 (61 layers, pp 16): stages
    0..14 hold 4 layers each (stage 0: the embedding, the 3 dense layers and the first MoE
    layer), stage 15 holds layer 60, the head and MTP. When the front-loaded split would leave a
    stage empty (e.g. 5 layers on 4 stages) the layers are spread evenly, the extra ones on the
    first stages. ``counts`` gives the per-stage layer counts explicitly.

    Raises:
        PlanError: ``counts`` not summing to ``n_layers``, fewer layers than stages, an empty
            stage.
    """
    if counts is None:
        if pp < 1 or n_layers < pp:
            raise PlanError(f"{user_site(3)}: {n_layers} layers cannot fill pp={pp} stages")
        per = -(-n_layers // pp)
        counts = [per] * (pp - 1) + [n_layers - per * (pp - 1)]
        if counts[-1] < 1:
            q, r = divmod(n_layers, pp)
            counts = [q + (s < r) for s in range(pp)]
    counts = list(counts)
    if len(counts) != pp or sum(counts) != n_layers or min(counts) < 1:
        raise PlanError(f"{user_site(3)}: layer split {counts} must give each of the {pp} "
                        f"stages at least one layer and sum to {n_layers}")
    from spec_lang.plans.torchtitan import pp_layer_split

    return pp_layer_split(n_layers, pp, counts)


# -- model adapters: the blocks each stage calls ---------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Adapter:
    """What the plan needs of a model; every function calls the model's own blocks (so layer
    boundaries are marked with the spec's names).

    embed(ctx, q, tokens) -> x (stage 0); layer(i, q, x, data, ctx, bias) -> (x, aux | None);
    head(ctx, q, x, data, bias_of) -> (main, aux | None) on the last stage, ``main`` the
    token-loss part of the objective (``S_r / N``, plus ``lambda`` times the MTP loss) and
    ``aux`` the balance losses computed there (MTP's MoE block); first_params / last_params:
    what stage 0 / the last stage hold besides their layers (a name in both is tied)."""

    model: Any
    n_layers: int
    dims: Any
    alpha: Any
    embed: Callable[..., Tensor]
    layer: Callable[..., tuple[Tensor, Tensor | None]]
    head: Callable[..., tuple[Tensor, Tensor | None]]
    first_params: tuple[str, ...]
    last_params: tuple[str, ...]
    is_expert: Callable[[str], bool]
    describe: str


def _is_expert(name: str) -> bool:
    return name.split(".", 2)[-1] in EXPERT_SUFFIXES


def _moe_adapter(m: MoEModel) -> _Adapter:
    c, d = m.config, m.dims

    def embed(ctx: Any, q: Params, tokens: Tensor) -> Tensor:
        return ctx.embed(tokens, q["tok_embeddings"], d.llama)

    def layer(i: int, q: Params, x: Tensor, data: Mapping[str, Tensor], ctx: Any,
              bias: Tensor | None) -> tuple[Tensor, Tensor | None]:
        return moe_block(q.scope(f"layers.{i}"), x, c, d, ctx, bias)

    def head(ctx: Any, q: Params, x: Tensor, data: Mapping[str, Tensor],
             bias_of: Callable[[str], Tensor | None]) -> tuple[Tensor, Tensor | None]:
        h = ctx.head_input(ops.rms_norm(x, q["norm"], d.H, c.norm_eps), d.llama)
        logits = ops.einsum(h, q["output"], out=(d.B, d.S, d.V))
        return ctx.loss(logits, data["labels"], data["mask"], d.llama), None

    return _Adapter(m, c.n_layers, d, c.aux_loss_alpha, embed, layer, head,
                    ("tok_embeddings",), ("norm", "output"), _is_expert,
                    f"{c.n_layers} MoE layer(s) (batch-wise aux loss)")


def _deepseek_adapter(m: Any) -> _Adapter:
    ds = importlib.import_module("spec_lang.models.deepseek")   # the module, not deepseek()

    c, d = m.config, m.dims

    def embed(ctx: Any, q: Params, tokens: Tensor) -> Tensor:
        return ctx.embed(tokens, q["tok_embeddings"], d)

    def layer(i: int, q: Params, x: Tensor, data: Mapping[str, Tensor], ctx: Any,
              bias: Tensor | None) -> tuple[Tensor, Tensor | None]:
        ps = q.scope(f"layers.{i}")
        if c.is_moe_layer(i):
            return ds.moe_block(ps, x, c, d, ctx, bias)
        return ds.dense_block(ps, x, c, d, ctx), None

    def head(ctx: Any, q: Params, x: Tensor, data: Mapping[str, Tensor],
             bias_of: Callable[[str], Tensor | None]) -> tuple[Tensor, Tensor | None]:
        main, mtp, aux = ds.deepseek_head(q, x, data, c, d, ctx, bias_of)
        if mtp is not None and c.mtp_lambda:
            main = main + mtp * c.mtp_lambda
        return main, aux

    last = ("norm", "output") + ((("tok_embeddings",) + tuple(
        f"mtp.{k}." for k in range(c.mtp_depth))) if c.mtp_depth else ())
    n_moe = sum(1 for i in range(c.n_layers) if c.is_moe_layer(i))
    return _Adapter(m, c.n_layers, d, c.aux_loss_alpha, embed, layer, head,
                    ("tok_embeddings",), last, _is_expert,
                    f"{c.n_layers - n_moe} dense + {n_moe} MoE layer(s), MTP depth "
                    f"{c.mtp_depth} (sequence-wise balance loss)")


def _adapter(model: Any) -> _Adapter:
    if isinstance(model, MoEConfig):
        model = moe(model)
    owner = getattr(getattr(model, "forward", None), "__self__", None)
    if isinstance(model, Spec) and owner is not None:
        model = owner
    if isinstance(model, MoEModel):
        return _moe_adapter(model)
    ds = importlib.import_module("spec_lang.models.deepseek")   # the module, not deepseek()

    if isinstance(model, ds.DeepSeekConfig):
        model = ds.deepseek(model)
    if isinstance(model, ds.DeepSeekModel):
        return _deepseek_adapter(model)
    raise PlanError(f"{user_site(3)}: deepseek_v3_parallel needs an MoE / DeepSeek-V3 model, its "
                    f"config or its spec, got {type(model).__name__}")


# -- the plan -------------------------------------------------------------------------------------

def deepseek_v3_parallel(model: Any, *, pp: int, ep: int, dp: int, microbatches: int,
                         settings: DeepSeekParallelSettings | None = None,
                         layer_counts: Sequence[int] | None = None, clip: bool = False) -> Plan:
    """DeepSeek-V3's PP x EP x ZeRO-1 DP plan (module docstring) on ``Mesh(pp, dp, ep)``.

    Args:
        model: an :class:`~spec_lang.models.moe.MoEModel` (or config / spec), or a DeepSeek-V3
            model of :mod:`spec_lang.models.deepseek`.
        pp: pipeline stages (at most the layer count). ep: expert-parallel ranks (divides the
            routed experts ``E``). dp: data-parallel replicas of the experts (the stage's dense
            data-parallel group is ``dp x ep``).
        microbatches: K; ``dp K ep`` must divide the batch ``B``.
        settings: see :class:`DeepSeekParallelSettings` (the mutants change it).
        layer_counts: layers per stage (default :func:`deepseek_layer_split`).
        clip: the spec clips at a global norm (DeepSeek-V3 sec. 4.2: 1.0): give
            ``grad_norm_sq`` = per stage, the squares of the owned ZeRO-1 blocks summed over
            their shard axes (dense: dp x ep; experts: E over ep, the owned block over dp;
            :func:`~spec_lang.plans.clipping.global_grad_norm_sq`), the tied embedding counted
            on stage 0 only (``Pipeline.stage_grads``), then all-reduced over pp
            (torchtitan #596; expert norms summed over ep: DeepSpeed #8478, CASES.md B23).

    Returns:
        the :class:`~spec_lang.plan.Plan` (a 1F1B :class:`~spec_lang.pipeline.Pipeline`
        schedule, ZeRO-1 optimizer placements).

    Raises:
        PlanError: a model of another kind, a split that leaves a stage empty, a parameter no
            dim of divides over its ZeRO group, an unknown schedule / exchange / bias mode;
            sizes that do not divide (named while tracing).
    """
    a = _adapter(model)
    st = settings or DeepSeekParallelSettings()
    site = user_site(2)
    if st.schedule not in ("1f1b", "gpipe"):
        raise PlanError(f"{site}: schedule {st.schedule!r}: '1f1b' or 'gpipe'")
    if st.exchange not in ("all_to_all", "all_gather"):
        raise PlanError(f"{site}: exchange {st.exchange!r}: 'all_to_all' or 'all_gather'")
    if st.bias not in ("select", "none"):
        raise PlanError(f"{site}: bias {st.bias!r}: 'select' or 'none'")
    if not isinstance(microbatches, int) or microbatches < 1:
        raise PlanError(f"{site}: microbatches={microbatches!r}: a positive integer")
    m, d = a.model, a.dims
    mesh = Mesh(pp=pp, dp=dp, ep=ep)
    split = deepseek_layer_split(a.n_layers, pp, layer_counts)
    params: dict[str, tuple[Any, ...]] = dict(m.params)
    experts = {k for k in params if a.is_expert(k)}

    # placements: data Shard(B) over dp (the ep block is taken in the stage code, innermost);
    # experts Shard(E) over ep; everything else whole on every rank of its stage
    placements: dict[str, dict[str, Placement]] = {
        k: {DP: Shard(d.B)} for k in ("tokens", "labels", "mask")}
    for k in experts:
        placements[k] = {EP: Shard(d.E)}
    # ZeRO-1 owned blocks
    dense_n = 1
    for ax in st.dense_zero_axes:
        dense_n *= mesh[ax]
    exp_n = 1
    for ax in st.expert_zero_axes:
        exp_n *= mesh[ax]
    dense = {k: v for k, v in params.items() if k not in experts}
    owned = {k: x.name for k, x in shard_dims(dense, {"n": dense_n}).items()} if dense else {}
    if experts:
        owned.update({k: x.name for k, x in shard_dims(
            {k: params[k] for k in experts}, {"n": exp_n, d.E.name: ep},
            {k: [d.E.name] for k in experts}).items()})
    order = list(mesh.axes)
    opt_pl: dict[str, dict[str, Placement]] = {}
    for k in params:
        zero = st.expert_zero_axes if k in experts else st.dense_zero_axes
        pl = {**placements.get(k, {}), **{ax: Shard(owned[k]) for ax in zero}}
        opt_pl[k] = dict(sorted(pl.items(), key=lambda kv: order.index(kv[0])))

    carried: dict[str, Any] = {}            # each stage's alpha A_l (MoEAuxLossAutoScaler)

    def add_aux(x: Tensor | None) -> None:
        if x is not None and st.aux_on_stage and a.alpha:
            carried["aux"] = x if carried.get("aux") is None else carried["aux"] + x

    def bias_of(data: Mapping[str, Tensor], key: str) -> Tensor | None:
        return data.get(key) if st.bias == "select" else None     # "none": a mutant

    def make_stage(s: int) -> Any:
        first, last = s == 0, s == pp - 1
        layers = split[s]

        def run(q: Params, data: Mapping[str, Tensor], io: Any) -> Any:
            ctx = DeepSeekEP(st)
            if first:
                carried.clear()
                x = a.embed(ctx, q, rank_batch(data["tokens"], d.B))
            else:
                x = io.recv()
            for i in layers:
                x, aux = a.layer(i, q, x, data, ctx,
                                 bias_of(data, f"layers.{i}.moe.e_score_correction_bias"))
                add_aux(aux)
            if not last:
                io.send(x)
                return None
            local = {**data, "labels": rank_batch(data["labels"], d.B),
                     "mask": rank_batch(data["mask"], d.B)}
            main, aux = a.head(ctx, q, x, local, lambda k: bias_of(data, k))
            add_aux(aux)
            seed = _scaled(main, st.loss_scale)
            report = all_reduce(all_reduce(main, EP), DP)
            tot = carried.get("aux")
            if tot is not None:
                t = tot * a.alpha
                seed = seed + _scaled(t, st.aux_scale)
                report = report + all_reduce(all_reduce(t, EP), DP)
            return Loss(backward=seed, report=report)

        held = [f"layers.{i}." for i in layers]
        if first:
            held += list(a.first_params)
        if last:
            held += [k for k in a.last_params if k not in held]
        return stage(run, held)

    sched = (one_f_one_b if st.schedule == "1f1b" else gpipe)(pp=pp, microbatches=microbatches)
    pipe = Pipeline([make_stage(s) for s in range(pp)], schedule=sched)

    def reduce_grads(name: str, g: Tensor) -> Tensor:
        is_exp = name in experts
        if len(pipe.stages_of(name)) > 1 and st.tied_reduce:
            # tied (the embedding shared by stage 0 and MTP on the last stage, DeepSeek-V3
            # sec. 2.2): each holder's buffer has its own uses' gradient; sum them over pp
            g = all_reduce(g, PP)
        g = _scaled(g, st.expert_grad_scale if is_exp else st.grad_scale)
        group = st.expert_grad_axes if is_exp else st.dense_grad_axes
        zero = st.expert_zero_axes if is_exp else st.dense_zero_axes
        for ax in order:                                       # mesh order: dp, then ep
            if ax in zero and ax in group:
                g = reduce_scatter(g, ax, owned[name])         # ZeRO: sum, keep the owned block
            elif ax in zero:
                g = region(g, "owned_block", "split", "split", ax, owned[name])   # no sum
            elif ax in group:
                g = all_reduce(g, ax)
        return g

    def gather_params(name: str, new: Tensor) -> Tensor:
        zero = st.expert_zero_axes if name in experts else st.dense_zero_axes
        for ax in reversed(order):                             # innermost shard first
            if ax in zero and ax in st.gather_axes:
                new = all_gather(new, ax, owned[name])
        return new

    norm_sq = None
    if clip:
        def norm_sq(grads: Mapping[str, Tensor]) -> Tensor:
            # stage s's local sum of squares, all-reduced over pp; written as two per-stage
            # sums (stage-local parameters, then the tied embedding on its first holder), which
            # is the same sum: the tied gradient was all-reduced over pp in reduce_grads, so
            # its per-stage value cannot be specialised to one coordinate by substitution
            tied = {k for k in grads if len(pipe.stages_of(k)) > 1}
            out = None
            for part in (False, True):
                vals = {}
                for s in range(pp):
                    mine = {k: g for k, g in pipe.stage_grads(s, grads).items()
                            if (k in tied) == part}
                    if mine:
                        vals[s] = global_grad_norm_sq(mine, mesh=mesh)
                if vals:
                    x = all_reduce(pipe.per_stage(vals), PP)
                    out = x if out is None else out + x
            assert out is not None
            return out

    return Plan(mesh=mesh, placements=placements, forward=pipe.forward, schedule=pipe,
                reduce_grads=reduce_grads, microbatches=_microbatches(microbatches, d.B),
                optimizer_placements=opt_pl, gather_params=gather_params,
                grad_norm_sq=norm_sq,
                assumptions=(f"DeepSeek-V3 parallelism: PP{pp} ({st.schedule}, {microbatches} "
                             f"micro-batches; DualPipe modelled as 1F1B) x EP{ep} x ZeRO-1 DP "
                             f"(dense over dp{dp} x ep{ep}, experts over dp{dp}); layers per "
                             f"stage {[len(r) for r in split]}; {a.describe}, dense "
                             "routing; token count N > 0",),
                site=site)
