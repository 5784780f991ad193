"""Context parallelism (Megatron-LM CP) for the Llama model, with data parallelism.

Mesh ``(dp, cp)``. Every CP rank holds the *load-balanced* chunks of the sequence: ``S`` is cut
into ``2 cp`` chunks and rank ``c`` holds chunks ``c`` and ``2cp-1-c`` (Megatron-LM
``get_batch_on_this_cp_rank``; ``spec_lang/cp.py``). The one index map is applied alike to

* the tokens, the labels and the loss mask (``cp_split``; labels are next-token targets the
  data loader shifted in *global* order, CASES.md B33),
* the RoPE ``cos/sin`` tables (``cp_rope_tables``: each token keeps its *global* position),
* the causal mask, on both query and key positions (``cp_causal_mask``).

Attention: **all-gathered K/V** (TransformerEngine ``cp_comm_type="all_gather"``; Megatron-LM's
default ring exchange ``"p2p"`` computes the same function block by block with online-softmax
rescaling, which is *not* what this plan writes; see ``docs/parallelism/context-parallel.md``).
Each rank projects its local tokens to ``q, k, v``, rotates them with its RoPE positions, and
gathers ``k, v`` over ``cp`` with ``gather_from_sp_region(x, S, axis=cp)``: the forward is an
all-gather along ``S`` (giving every key position, in load-balanced order) and the declared
backward a reduce-scatter of ``dK, dV`` (Megatron's ``AllGatherComm`` in
``attention.py``/TE ``AttnFuncWithCPAndKVAllGather``). The local queries attend to all keys
under the load-balanced causal mask. MLP and norms are per token.

Loss: per-token cross-entropy summed over the rank's tokens, divided by the global token count
``N = AR_sum[dp x cp](sum(mask))`` (Megatron ``calculate_per_token_loss``); the reported loss is
``AR_sum[dp x cp]`` of it; gradients are ``AR_sum`` over ``cp`` then ``dp`` (parameters are
replicated on both; Megatron reduces gradients over the ``dp x cp`` group).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spec_lang import ops
from spec_lang.collectives import all_reduce, broadcast, region
from spec_lang.cp import cp_causal_mask, cp_rope_tables, cp_split, load_balance, rope_with_tables
from spec_lang.errors import PlanError
from spec_lang.mesh import Mesh
from spec_lang.models.llama import (
    LlamaDims, LlamaModel, ParallelContext, SpecContext, feed_forward,
)
from spec_lang.placement import Shard
from spec_lang.plan import Loss, Plan
from spec_lang.spec import Params
from spec_lang.tensor import Tensor, fail
from spec_lang.term import Axis

__all__ = ["CPSettings", "context_parallel", "cp_attention", "cp_attention_online",
           "cp_transformer_block", "GATHER_KV",
           "GATHER_Q", "MERGE_O"]

DP, CP = Axis.DP, Axis.CP

GATHER_KV = ("all_gather", "reduce_scatter")
"""K/V all-gather over cp along S; backward reduce-scatters dK/dV (``gather_from_sp_region``)."""
GATHER_Q = ("all_gather", "reduce_scatter")
"""Online attention: queries all-gathered over cp along S; backward reduce-scatters dQ."""
MERGE_O = ("reduce_scatter", "all_gather")
"""Online attention: the rescaled partial outputs and sums are summed over cp and each rank keeps
its queries' rows (reduce-scatter along S); backward all-gathers the gradient."""


@dataclass(frozen=True, kw_only=True)
class CPSettings:
    """What the CP plan decides; the defaults are Megatron's. Each field is one mutant away.

    Attributes:
        label_map: ``"load_balanced"`` (the token map) or ``"contiguous"`` (labels split with a
            plain ``Shard(S)``: a different map from the tokens').
        rope_positions: ``"global"`` (the rank's permuted global positions) or ``"local"``
            (positions ``0 .. |S|/cp - 1`` on every rank).
        grad_reduce_axes: the axes gradients are summed over (Megatron: ``(cp, dp)``).
        token_count_axes: the axes the token count is summed over (``(cp, dp)``).
        gather_kv: the (forward, declared backward) pair of the K/V gather region.
        attention: ``"gather_kv"`` (all-gathered K/V, one softmax) or ``"online"`` (each rank
            attends all queries to its own K/V block and the cp partials are merged with the
            online-softmax rescaling: running max over cp, ``exp(m_r - m)``, summed outputs and
            denominators; :func:`cp_attention_online`).
        online_rescale: ``False`` drops the ``exp(m_r - m)`` rescaling (a mutant).
        online_global_max: ``False`` uses the rank's own max ``m_r`` as ``m`` (a mutant).
        online_passes: ``2`` merges the rescaled normalisers ``l`` first and then the blocks'
            normalised outputs ``sum_r (p_r exp(m_r - m) / l) v_r`` (proved, value and
            gradients); ``1`` merges ``o`` and ``l`` together and divides last (value proved,
            gradients UNKNOWN: they differ from the spec's by the order of two contractions).
    """

    label_map: str = "load_balanced"
    rope_positions: str = "global"
    grad_reduce_axes: tuple[str, ...] = (CP, DP)
    token_count_axes: tuple[str, ...] = (CP, DP)
    gather_kv: tuple[str, str] = GATHER_KV
    attention: str = "gather_kv"
    online_rescale: bool = True
    online_global_max: bool = True
    online_passes: int = 2
    extra: dict[str, Any] = field(default_factory=dict)


def cp_attention(p: Params, x: Tensor, model: LlamaModel, cos: Tensor, sin: Tensor,
                 mask_: Tensor, s: CPSettings, ctx: ParallelContext | None = None) -> Tensor:
    """Causal GQA attention of the rank's queries against all keys (all-gathered K/V).

    x: (B, S[cp], H) in load-balanced order; cos, sin: (S[cp], HD_half) at the rank's global
    positions; mask_: (S[cp], T) the load-balanced causal mask. Returns (B, S[cp], H).

    ``ctx`` (optional): a TP context (:class:`~spec_lang.plans.megatron.MegatronTP`) whose
    ``enter_tp`` / ``exit_tp`` wrap the projections, as in the model's own attention: with TP
    the weights are the rank's heads and the K/V gather runs on the rank's KV heads; with SP
    ``x`` arrives as (B, S[cp, tp], H) and ``enter_tp`` all-gathers the tp shards first.
    """
    c, d = model.config, model.dims
    if ctx is not None:
        x = ctx.enter_tp(x, d)
    q = ops.einsum(x, p["wq"], out=(d.B, d.S, d.KVH, d.G, d.HD))
    k = ops.einsum(x, p["wk"], out=(d.B, d.S, d.KVH, d.HD))
    v = ops.einsum(x, p["wv"], out=(d.B, d.S, d.KVH, d.HD))
    q = rope_with_tables(q, d.HD, d.HD_half, cos, sin)
    k = rope_with_tables(k, d.HD, d.HD_half, cos, sin)
    k = region(k, "gather_kv_cp", *s.gather_kv, CP, d.S)           # (B, S, KVH, HD), all keys
    v = region(v, "gather_kv_cp", *s.gather_kv, CP, d.S)
    k = ops.rename(k, d.S, d.T)
    v = ops.rename(v, d.S, d.T)
    scores = ops.einsum(q, k, out=(d.B, d.KVH, d.G, d.S, d.T))
    scores = scores * ops.rsqrt(ops.dim_size(d.HD))
    probs = ops.softmax(scores, d.T, mask=mask_)
    o = ops.einsum(probs, v, out=(d.B, d.S, d.KVH, d.G, d.HD))
    del c
    y = ops.einsum(o, p["wo"], out=(d.B, d.S, d.H))
    return ctx.exit_tp(y, d) if ctx is not None else y


def cp_transformer_block(p: Params, x: Tensor, model: LlamaModel, cos: Tensor, sin: Tensor,
                         causal: Tensor, s: CPSettings, ctx: ParallelContext | None = None
                         ) -> Tensor:
    """The pre-norm Llama block (``spec_lang.models.llama.transformer_block``) on the rank's
    load-balanced tokens: ``h = x + cp_attn(norm(x))``, ``out = h + mlp(norm(h))``.

    x: (B, S[cp], H) (with SP: (B, S[cp, tp], H)) -> the same. Marks its input and output as
    the layer boundaries ``<scope>`` / ``<scope>.out`` (the names the spec's
    ``transformer_block`` records). ``ctx`` (default :class:`SpecContext`) supplies the TP/SP
    regions of the attention and the MLP.
    """
    c, d = model.config, model.dims
    x = ops.layer_boundary(x, p.prefix.rstrip("."))
    hn = ops.rms_norm(x, p["attention_norm"], d.H, c.norm_eps)
    if s.attention == "online":
        if ctx is not None and not isinstance(ctx, SpecContext):
            raise fail("cp_transformer_block: the online-softmax CP attention has no TP "
                       "hooks; use attention='gather_kv' with tp")
        a = cp_attention_online(p.scope("attn"), hn, model, cos, sin, s)
    else:
        a = cp_attention(p.scope("attn"), hn, model, cos, sin, causal, s, ctx)
    h = x + a
    out = h + feed_forward(p.scope("mlp"), ops.rms_norm(h, p["ffn_norm"], d.H, c.norm_eps), d,
                           ctx or SpecContext())
    return ops.layer_boundary(out, p.prefix + "out")


def cp_attention_online(p: Params, x: Tensor, model: LlamaModel, cos: Tensor, sin: Tensor,
                        s: CPSettings) -> Tensor:
    """Causal GQA attention as per-block online softmax merged across cp (flash/ring attention's
    combine: Milakov & Gimelshein 2018, "Online normalizer calculation for softmax"; Liu et al.
    2023, "Ring Attention", section 3).

    Each rank keeps its K/V block (its load-balanced tokens) and all-gathers the queries; it
    computes the block's scores ``s_r``, its max ``m_r = max_T s_r``, ``p_r = exp(s_r - m_r)``
    (causal mask applied) and ``l_r = sum_T p_r``. The blocks merge with the running max
    ``m = AR_max[cp](m_r)`` (stop-gradient) and the rescaling ``a_r = exp(m_r - m)``:
    ``l = RS_sum[cp](l_r a_r)`` (each rank keeps its queries' rows). Two passes (default): ``l``
    is all-gathered and ``out = RS_sum[cp]((p_r a_r / l) v_r)``; one pass:
    ``out = RS_sum[cp](o_r a_r) / l`` with ``o_r = p_r v_r``. x: (B, S[cp], H) -> (B, S[cp], H).

    The communication is all-gather(Q) + reduce-scatter(l, O) + all-reduce-max, not the ring's
    point-to-point K/V rotation; the arithmetic (per-block max, ``exp`` rescaling, summed
    outputs and denominators over the cp blocks of K/V) is ring attention's merge.
    """
    d = model.dims
    q = ops.einsum(x, p["wq"], out=(d.B, d.S, d.KVH, d.G, d.HD))
    k = ops.einsum(x, p["wk"], out=(d.B, d.S, d.KVH, d.HD))
    v = ops.einsum(x, p["wv"], out=(d.B, d.S, d.KVH, d.HD))
    q = rope_with_tables(q, d.HD, d.HD_half, cos, sin)
    k = rope_with_tables(k, d.HD, d.HD_half, cos, sin)
    q = region(q, "gather_q_cp", *GATHER_Q, CP, d.S)               # (B, S, KVH, G, HD): all queries
    k = ops.rename(k, d.S, d.T)                                      # (B, T[cp], KVH, HD): my keys
    v = ops.rename(v, d.S, d.T)
    mask_ = cp_split(load_balance(ops.causal_mask(d.S, d.T), d.S), d.T)   # (S, T[cp])
    scores = ops.einsum(q, k, out=(d.B, d.KVH, d.G, d.S, d.T))
    scores = scores * ops.rsqrt(ops.dim_size(d.HD))
    m_r = ops.stop_gradient(ops.max(scores, d.T))                    # this block's max
    p_r = ops.exp(scores - m_r) * mask_
    l_r = ops.sum(p_r, d.T)
    o_r = ops.einsum(p_r, v, out=(d.B, d.S, d.KVH, d.G, d.HD))
    m = ops.stop_gradient(all_reduce(m_r, CP, "max")) if s.online_global_max else m_r
    a = ops.exp(m_r - m) if s.online_rescale else ops.const(1)       # rescale to the running max
    if s.online_passes == 1:
        o = region(o_r * a, "merge_cp", *MERGE_O, CP, d.S)           # (B, S[cp], KVH, G, HD)
        l_ = region(l_r * a, "merge_cp", *MERGE_O, CP, d.S)
        return ops.einsum(o / l_, p["wo"], out=(d.B, d.S, d.H))
    # two passes: merge the normalisers first, then each block's normalised probabilities
    l_ = region(l_r * a, "merge_cp", *MERGE_O, CP, d.S)              # (B, KVH, G, S[cp])
    l_all = region(l_, "gather_l_cp", *GATHER_Q, CP, d.S)            # every query's normaliser
    o_r = ops.einsum(p_r * a / l_all, v, out=(d.B, d.S, d.KVH, d.G, d.HD))
    o = region(o_r, "merge_cp", *MERGE_O, CP, d.S)
    return ops.einsum(o, p["wo"], out=(d.B, d.S, d.H))


def _rope_tables(d: LlamaDims, theta: Any, s: CPSettings) -> tuple[Tensor, Tensor]:
    if s.rope_positions == "global":
        return cp_rope_tables(d.S, d.HD_half, theta)
    # local indices: every rank uses positions 0 .. |S|/cp - 1 (rank 0's contiguous block)
    cos, sin = ops.rope_cos(d.S, d.HD_half, theta), ops.rope_sin(d.S, d.HD_half, theta)
    return (broadcast(_contiguous(cos, d.S), CP, 0), broadcast(_contiguous(sin, d.S), CP, 0))


def _contiguous(x: Tensor, dim: Any) -> Tensor:
    """A plain contiguous ``Shard(dim)`` over cp of a replicated table or data tensor."""
    from spec_lang.term import DimSpec, Op, term  # noqa: PLC0415
    n = dim.name
    dims = tuple(DimSpec(q.name, q.shards + (str(CP),)) if q.name == n else q
                 for q in x.term.dims)
    return Tensor(term(Op.SHARD, (x.term,), (n, str(CP)), dims), x.site)


def require_plain_llama(model: object, what: str) -> None:
    """The CP attention (:func:`cp_attention`) and head here are the Llama model's: refuse a
    model they would silently mistrace (Qwen2's q/k/v biases, a tied head, another class).

    Raises:
        PlanError: naming the user's line and what is unsupported.
    """
    from spec_lang.models.protocol import caller_site  # noqa: PLC0415

    c = getattr(model, "config", None)
    if not isinstance(model, LlamaModel) or c.qkv_bias or c.tie_embeddings:
        raise PlanError(f"{caller_site()}: {what}: context parallelism is implemented for the "
                        f"Llama model without q/k/v biases or a tied head; "
                        f"{getattr(c, 'name', type(model).__name__)} is not one "
                        "(docs/models.md, 'What is not modelled')")


def context_parallel(model: LlamaModel, *, cp: int, dp: int = 1,
                     settings: CPSettings | None = None) -> Plan:
    """Megatron CP (load-balanced chunks, all-gathered K/V) x DP for ``model``.

    Batch ``B`` is split over dp (``Shard(B)`` placements); the sequence is split over cp by
    the load-balanced map inside the forward (``cp_split``), so ``|S|`` must be a multiple of
    ``2 cp`` (pad with mask 0 otherwise). Parameters and optimizer state are replicated.

    Raises:
        PlanError: ``|S|`` not a multiple of ``2 cp`` (from ``cp_split``), or ``dp`` not
            dividing ``B``; a model other than the plain Llama one (q/k/v biases, a tied head:
            the CP attention and head here are Llama's).
    """
    s = settings or CPSettings()
    c, d = model.config, model.dims
    require_plain_llama(model, "context_parallel")

    def forward(p: Params, data: dict[str, Tensor]) -> Loss:
        tokens = cp_split(data["tokens"], d.S)
        mask_ = cp_split(data["mask"], d.S)
        labels = (cp_split(data["labels"], d.S) if s.label_map == "load_balanced"
                  else _contiguous(data["labels"], d.S))
        cos, sin = _rope_tables(d, c.rope_theta, s)
        causal = cp_causal_mask(d.S, d.T)
        x = ops.embedding(tokens, p["tok_embeddings"], d.V)
        for i in range(c.n_layers):
            x = cp_transformer_block(p.scope(f"layers.{i}"), x, model, cos, sin, causal, s)
        x = ops.rms_norm(x, p["norm"], d.H, c.norm_eps)
        logits = ops.einsum(x, p["output"], out=(d.B, d.S, d.V))
        ce = ops.cross_entropy_per_token(logits, labels, d.V)
        n_tokens = ops.sum(mask_)
        for a in s.token_count_axes:
            n_tokens = all_reduce(n_tokens, a)
        local = ops.sum(mask_ * ce) / n_tokens
        report = local
        for a in (CP, DP):
            report = all_reduce(report, a)
        return Loss(backward=local, report=report)

    def reduce_grads(name: str, g: Tensor) -> Tensor:
        for a in s.grad_reduce_axes:
            g = all_reduce(g, a)
        return g

    data_placements = {k: {DP: Shard(d.B)} for k in ("tokens", "labels", "mask")}
    return Plan(mesh=Mesh(dp=dp, cp=cp), placements=data_placements, forward=forward,
                reduce_grads=reduce_grads)
