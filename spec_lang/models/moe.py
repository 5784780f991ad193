"""A DeepSeek-style mixture-of-experts (MoE) transformer as a spec, with hooks for expert parallelism.

Each layer is Llama's pre-norm block (the attention is :func:`spec_lang.models.llama.attention`)
with the SwiGLU MLP replaced by an MoE layer:

* a router ``logits = x W_r``: ``(B, S, H) x (H, E) -> (B, S, E)``;
* gating, one of
  * ``"sigmoid"`` (DeepSeek-V3 tech report, sec. 2.1.2, eqs. 12-16): ``s = sigmoid(logits)``;
    the experts are the top-k of ``s + b`` where ``b`` (``e_score_correction_bias``, data, not
    trained by gradient) is the auxiliary-loss-free balancing bias, used **for selection only**;
    the gate weights are the selected ``s``, normalised over the selected experts
    (``g = s m / sum_E(s m)``) and multiplied by ``routed_scaling``;
  * ``"softmax"`` (Mixtral, Jiang et al. 2024, sec. 2.1; Switch Transformer, Fedus et al. 2022):
    ``p = softmax_E(logits)``; the top-k of ``p``; gate weights ``p m`` (optionally normalised over
    the selected experts, which for Mixtral equals its softmax over the top-k logits);
* ``E`` routed experts, each a SwiGLU ``(silu(x w1_e) * (x w3_e)) w2_e`` with ``w1, w3: (E, H, FE)``
  and ``w2: (E, FE, H)``, applied to the tokens routed to it; plus ``n_shared`` shared experts
  (one SwiGLU of width ``FS = n_shared * FE`` applied to every token, DeepSeekMoE);
* output ``y = sum_E g[t, e] * expert_e(m[t, e] x_t) + shared(x_t)``.

Routing is written densely: ``m = topk_mask(scores, E, k)`` is a 0/1 mask ``(B, S, E)`` and the
dispatched activations are ``x m`` with dims ``(B, S, E, H)`` (a token not routed to ``e`` is a
zero row, which SwiGLU maps to 0 and whose gate weight is 0). Top-k selection is discrete and is
not differentiated; the router gets its gradient through the selected scores (and the aux loss).

**Load-balancing auxiliary loss** (Switch Transformer eq. 4; GShard; DeepSeek-V3 eqs. 17-20):
``A = E * sum_e f_e P_e`` with ``f_e = (1 / (k N)) sum_t m[t, e]`` (the fraction of routing
assignments that go to ``e``; from the routing decision, no gradient) and ``P_e = (1 / N)
sum_t p[t, e]`` the mean router probability (``p`` the softmax, or the normalised sigmoid
scores ``s / sum_E s``), over the ``N = |B| |S|`` tokens of the global batch. The training
objective is ``CE + alpha * sum_layers A``. A plan that shards tokens computes ``P_e`` as a
per-rank addend (``ops.mean`` with global sizes): a ``Partial`` term whose scale it must get
right (CASES.md B28).

Hooks (:class:`MoEContext`, identity in the spec): ``dispatch`` / ``combine`` (expert
parallelism: an all-to-all over ``ep``), ``routing_count`` (the global count of routing
assignments, an all-reduce over the token axes), plus Llama's hooks (the shared expert is a
dense MLP and enters / leaves a TP region through ``enter_tp`` / ``exit_tp``, as Llama's MLP).

**Group-limited routing** (DeepSeek-V3 tech report sec. 2.1.2 / the official ``Gate.forward``;
``n_groups > 1``, :func:`group_limited_topk`): the ``E`` experts form ``n_groups`` contiguous
groups of ``EG = E / n_groups``; a group's score is the sum of its two largest selection scores
``s + b``; the ``topk_groups`` best groups are eligible; the ``top_k`` experts are the largest
``s + b`` among the eligible ones. Written exactly with named dims (no ``-inf``, no large
constant, no constant mask): each group is a ``chunk`` of ``E`` renamed to ``EG``; its score
(``topk_mask`` over ``EG``, then a sum) is broadcast back over its ``EG`` entries and the blocks
are concatenated along ``E`` (``gscore (B, S, E)``: every expert carries its group's score);
the eligible experts are ``topk_mask(gscore, E, topk_groups * EG)`` -- the groups are
contiguous runs of equal values, so under the stable order (value descending, lower index
first) the first ``topk_groups * EG`` entries are exactly the ``topk_groups`` best groups, ties
going to the lower group; the final selection is ``topk_mask(s + b, E, top_k,
eligible=...)`` (top-k among eligible entries, ``Op.TOPK_MASK`` with two operands). An explicit
group dim (``E`` split into ``(G, EG)``) would need a reshape of the router and expert weights,
which the DSL does not have and which would change the parameter shapes plans shard over
``ep``; chunks keep ``E`` flat.

Configs: :data:`MOE_DEBUG` (tiny). Names are generic (``n_routed_experts``, ``n_shared_experts``,
``top_k``, ``n_groups`` / ``topk_groups``); DeepSeek-V3-671B itself, with MLA and its dense
layers, is :mod:`spec_lang.models.deepseek`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, ClassVar

from spec_lang import ops
from spec_lang.dims import Dim
from spec_lang.errors import SpecError
from spec_lang.models.llama import LlamaConfig, LlamaDims, ParallelContext, attention
from spec_lang.models.protocol import Stages, colwise, replicated, rowwise
from spec_lang.placement import Placement
from spec_lang.spec import Data, Params, index, mask, real
from spec_lang.tensor import Tensor

__all__ = ["MoEConfig", "MOE_DEBUG", "MoEDims", "MoEContext", "MoEModel", "moe", "router",
           "group_limited_topk",
           "moe_layer", "moe_block", "moe_forward", "swiglu", "aux_loss"]


@dataclass(frozen=True, kw_only=True, slots=True)
class MoEConfig:
    """Sizes and constants of a DeepSeek-style MoE model (exact constants).

    Attributes:
        n_routed_experts: E. n_shared_experts: shared experts (0 or more; one SwiGLU of width
            n_shared * moe_ffn_hidden). top_k: experts per token. gating: "sigmoid"
            (DeepSeek-V3) or "softmax" (Mixtral / Switch). norm_topk_prob: normalise the
            selected gate weights to sum 1. routed_scaling: factor on the routed output
            (DeepSeek-V3: 2.5). balance_bias: sigmoid gating with the selection-only bias.
            aux_loss_alpha: coefficient of the load-balancing loss (0: none).
            n_groups / topk_groups: group-limited routing (:func:`group_limited_topk`).
            attention: False gives a router-only stack (embedding, MoE layers, head), for the
            smallest bug configurations.
    """

    name: str
    hidden: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    moe_ffn_hidden: int          # FE, per-expert FFN width
    n_routed_experts: int        # E
    n_shared_experts: int = 1
    top_k: int = 2
    gating: str = "sigmoid"
    norm_topk_prob: bool = True
    routed_scaling: Any = 1
    balance_bias: bool = True
    aux_loss_alpha: Any = Fraction(1, 100)
    n_groups: int = 1
    topk_groups: int = 1
    attention: bool = True
    vocab: int = 32
    rope_theta: Any = 10000
    norm_eps: Any = Fraction(1, 10**5)
    batch: int = 4
    seq: int = 8

    def llama(self) -> LlamaConfig:
        """The Llama view used by the attention block (same widths and constants)."""
        return LlamaConfig(name=self.name, hidden=self.hidden, n_layers=self.n_layers,
                           n_heads=self.n_heads, n_kv_heads=self.n_kv_heads,
                           ffn_hidden=self.moe_ffn_hidden, vocab=self.vocab,
                           rope_theta=self.rope_theta, norm_eps=self.norm_eps,
                           batch=self.batch, seq=self.seq)


MOE_DEBUG = MoEConfig(name="moe_debug", hidden=8, n_layers=1, n_heads=2, n_kv_heads=1,
                      moe_ffn_hidden=4, n_routed_experts=4, n_shared_experts=1, top_k=2,
                      gating="sigmoid", norm_topk_prob=True, routed_scaling=Fraction(5, 2),
                      balance_bias=True, aux_loss_alpha=Fraction(1, 100), vocab=16,
                      batch=4, seq=4)
"""One layer, 4 routed experts + 1 shared, top-2, DeepSeek-V3 gating (sigmoid, selection bias,
normalised top-k, routed scaling 2.5), aux loss alpha 0.01; for tests and the EP example."""


@dataclass(frozen=True, slots=True)
class MoEDims:
    """Llama's dims plus ``E`` (routed experts), ``FE`` (expert FFN), ``FS`` (shared FFN)."""

    llama: LlamaDims
    E: Dim
    FE: Dim
    FS: Dim

    def __getattr__(self, name: str) -> Dim:  # B, S, H, V, ... from the Llama dims
        return getattr(object.__getattribute__(self, "llama"), name)

    @staticmethod
    def of(c: MoEConfig) -> MoEDims:
        return MoEDims(LlamaDims.of(c.llama()), Dim("E", c.n_routed_experts),
                       Dim("FE", c.moe_ffn_hidden),
                       Dim("FS", max(1, c.n_shared_experts) * c.moe_ffn_hidden))


class MoEContext(ParallelContext):
    """Llama's hooks plus the MoE ones; the identity in the spec."""

    def dispatch(self, xe: Tensor, d: MoEDims) -> Tensor:
        """Token activations for every expert, ``(B, S, E, H)`` (zero rows where not routed),
        on their way to the experts. Expert parallelism: all-to-all over ``ep`` (split E,
        concatenate the token dim)."""
        return xe

    def combine(self, ye: Tensor, d: MoEDims) -> Tensor:
        """Expert outputs ``(B, S, E, H)`` on their way back to the tokens' ranks (the reverse
        all-to-all under expert parallelism)."""
        return ye

    def routing_count(self, count: Tensor, d: MoEDims) -> Tensor:
        """Routing assignments per expert ``(E,)`` over the rank's tokens -> over the global
        batch (an all-reduce over the token axes in a plan). Not differentiated."""
        return count


def swiglu(x: Tensor, w1: Tensor, w3: Tensor, w2: Tensor, out: tuple[Dim, ...], f: Dim) -> Tensor:
    """``(silu(x w1) * (x w3)) w2`` contracting ``H`` then ``f``; ``out`` the output dims."""
    hid = tuple(x_ for x_ in out if x_.name != "H") + (f,)
    a = ops.silu(ops.einsum(x, w1, out=hid))
    b = ops.einsum(x, w3, out=hid)
    return ops.einsum(a * b, w2, out=out)


def group_limited_topk(select: Tensor, c: MoEConfig, d: MoEDims) -> Tensor:
    """0/1 routing mask ``(B, S, E)``: the ``top_k`` largest ``select`` among the experts of the
    ``topk_groups`` best of ``n_groups`` contiguous groups, a group scored by the sum of its
    two largest ``select`` (DeepSeek-V3 ``Gate.forward`` with a bias; see the module docstring
    for the exact construction and the tie order). ``select``: ``(B, S, E)``, ``E`` unsharded.

    Raises:
        SpecError: ``n_groups`` not dividing ``E``, ``topk_groups`` not in ``1..n_groups``, or
            ``top_k`` above the experts of ``topk_groups`` groups.
    """
    ng, e = c.n_groups, d.E.size
    if ng < 1 or e % ng or not 1 <= c.topk_groups <= ng or c.top_k > c.topk_groups * (e // ng):
        raise SpecError(f"{c.name}: group-limited routing needs n_groups ({ng}) to divide E "
                        f"({e}), topk_groups ({c.topk_groups}) in 1..n_groups and top_k "
                        f"({c.top_k}) <= topk_groups * E / n_groups")
    eg = Dim("EG", e // ng)
    blocks = []
    for g in range(ng):
        sg = ops.rename(ops.chunk(select, d.E, ng, g), d.E, eg)                 # (B, S, EG)
        score = ops.sum(sg * ops.topk_mask(sg, eg, min(2, eg.size)), eg)         # (B, S)
        # the group's score on each of its experts: + 0 * sg broadcasts it over EG (exact)
        blocks.append(ops.rename(score + sg * 0, eg, d.E, block=(g, ng)))
    gscore = ops.concat(blocks, d.E)                                            # (B, S, E)
    eligible = ops.topk_mask(gscore, d.E, c.topk_groups * eg.size)
    return ops.topk_mask(select, d.E, c.top_k, eligible=eligible)


def router(p: Params, x: Tensor, c: MoEConfig, d: MoEDims, bias: Tensor | None
           ) -> tuple[Tensor, Tensor, Tensor]:
    """Routing of tokens ``x (B, S, H)``: returns ``(gates, mask, probs)``, each ``(B, S, E)``.

    ``mask`` is the 0/1 top-k selection (no gradient); ``gates`` the weights of the selected
    experts (zero elsewhere); ``probs`` the router probabilities the aux loss averages.
    DeepSeek-V3 sec. 2.1.2 (sigmoid, bias for selection only, normalised) or Mixtral / Switch
    (softmax).

    Raises:
        SpecError: unknown gating, or group sizes that do not fit (:func:`group_limited_topk`).
    """
    logits = ops.einsum(x, p["router"], out=(d.B, d.S, d.E))
    if c.gating == "sigmoid":
        scores = ops.sigmoid(logits)
        probs = scores / ops.sum(scores, d.E)
    elif c.gating == "softmax":
        scores = ops.softmax(logits, d.E)
        probs = scores
    else:
        raise SpecError(f"{c.name}: gating {c.gating!r}: use 'sigmoid' or 'softmax'")
    select = scores + bias if bias is not None else scores
    m = ops.topk_mask(select, d.E, c.top_k) if c.n_groups == 1 else \
        group_limited_topk(select, c, d)
    gates = scores * m
    if c.norm_topk_prob:
        gates = gates / ops.sum(gates, d.E)
    if c.routed_scaling != 1:
        gates = gates * c.routed_scaling
    return gates, m, probs


def aux_loss(m: Tensor, probs: Tensor, c: MoEConfig, d: MoEDims, ctx: MoEContext) -> Tensor:
    """Load-balancing loss ``E * sum_e f_e P_e`` (Switch Transformer eq. 4; DeepSeek-V3 eq. 17
    with ``f_e = E/(kN) count_e``): ``f_e`` from the global routing counts (no gradient),
    ``P_e`` the mean router probability over the global token count (on a rank with a block of
    the tokens: its addend). Scalar."""
    count = ctx.routing_count(ops.sum(m, (d.B, d.S)), d)                       # (E,)
    n_tok = ops.dim_size(d.B) * ops.dim_size(d.S)
    f = ops.stop_gradient(count) / (n_tok * c.top_k)
    pm = ops.mean(probs, (d.B, d.S))                                             # (E,)
    return ops.sum(f * pm) * ops.dim_size(d.E)


def moe_layer(p: Params, x: Tensor, c: MoEConfig, d: MoEDims, ctx: MoEContext,
              bias: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """MoE layer ``x (B, S, H) -> (y (B, S, H), aux ())``; weights ``router (H, E)``,
    ``experts.w1/w3 (E, H, FE)``, ``experts.w2 (E, FE, H)``, ``shared.w1/w3 (H, FS)``,
    ``shared.w2 (FS, H)``."""
    gates, m, probs = router(p, x, c, d, bias)
    xe = ctx.dispatch(x * m, d)                                                  # (B, S, E, H)
    ye = swiglu(xe, p["experts.w1"], p["experts.w3"], p["experts.w2"], (d.B, d.S, d.E, d.H), d.FE)
    ye = ctx.combine(ye, d)
    y = ops.einsum(ye, gates, out=(d.B, d.S, d.H))
    if c.n_shared_experts:
        # the shared expert is a dense MLP: under TP it is column/row-parallel like Llama's
        # (Megatron's SharedExpertMLP), so it enters / leaves the TP region by the same hooks
        xs = ctx.enter_tp(x, d.llama)
        y = y + ctx.exit_tp(swiglu(xs, p["shared.w1"], p["shared.w3"], p["shared.w2"],
                                   (d.B, d.S, d.H), d.FS), d.llama)
    return y, aux_loss(m, probs, c, d, ctx)


def moe_block(p: Params, x: Tensor, c: MoEConfig, d: MoEDims, ctx: MoEContext,
              bias: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Pre-norm block ``x + attn(norm(x))`` then ``+ moe(norm(.))``; returns ``(x', aux)``.

    Marks its input and output as layer boundaries ``<scope>`` and ``<scope>.out``."""
    x = ops.layer_boundary(x, p.prefix.rstrip("."))
    h = x
    if c.attention:
        h = x + attention(p.scope("attn"), ops.rms_norm(x, p["attention_norm"], d.H, c.norm_eps),
                          c.llama(), d.llama, ctx)
    y, aux = moe_layer(p.scope("moe"), ops.rms_norm(h, p["ffn_norm"], d.H, c.norm_eps), c, d, ctx,
                       bias)
    return ops.layer_boundary(h + y, p.prefix + "out"), aux


def moe_forward(p: Params, data: Mapping[str, Tensor], c: MoEConfig, d: MoEDims,
                ctx: MoEContext) -> tuple[Tensor, Tensor]:
    """Embedding, MoE blocks, final norm, head. Returns ``(main, aux)``: the masked token-mean
    cross-entropy (``ctx.loss``) and the sum of the layers' aux losses (before ``alpha``)."""
    x = ctx.embed(data["tokens"], p["tok_embeddings"], d.llama)
    aux = None
    for i in range(c.n_layers):
        bias = data.get(f"layers.{i}.moe.e_score_correction_bias")
        x, a = moe_block(p.scope(f"layers.{i}"), x, c, d, ctx, bias)
        aux = a if aux is None else aux + a
    x = ctx.head_input(ops.rms_norm(x, p["norm"], d.H, c.norm_eps), d.llama)
    logits = ops.einsum(x, p["output"], out=(d.B, d.S, d.V))
    return ctx.loss(logits, data["labels"], data["mask"], d.llama), aux


@dataclass(frozen=True)
class MoEModel:
    """An MoE spec: config, dims, parameters, data, and the forward with a context hook."""

    config: MoEConfig
    dims: MoEDims
    params: dict[str, tuple[Dim, ...]] = field(repr=False)
    data: dict[str, Data] = field(repr=False)

    def forward(self, p: Params, data: Mapping[str, Tensor],
                ctx: MoEContext | None = None) -> Tensor:
        """The training objective ``CE + alpha * sum_layers aux``."""
        main, aux = moe_forward(p, data, self.config, self.dims, ctx or MoEContext())
        if not self.config.aux_loss_alpha:
            return main
        return main + aux * self.config.aux_loss_alpha

    def spec(self, optimizer: Any, **kw: Any) -> Any:
        """A :class:`~spec_lang.spec.Spec` of one training iteration with ``optimizer``."""
        from spec_lang.spec import Spec  # noqa: PLC0415

        return Spec(params=self.params, data=self.data, forward=self.forward,
                    optimizer=optimizer, **kw)

    # -- the model protocol (spec_lang/models/protocol.py) ----------------------------------------
    def stages(self) -> Stages:
        """Embedding, blocks (each returning its balance-loss term before ``alpha``) and head;
        the pipeline adds ``alpha`` times the stage's terms to its loss."""
        c, d = self.config, self.dims

        def block(i: int, p: Params, x: Tensor, data: Mapping[str, Tensor], ctx: Any) -> Any:
            return moe_block(p.scope(f"layers.{i}"), x, c, d, ctx,
                             data.get(f"layers.{i}.moe.e_score_correction_bias"))

        def head(p: Params, x: Tensor, data: Mapping[str, Tensor], ctx: Any) -> Tensor:
            x = ctx.head_input(ops.rms_norm(x, p["norm"], d.H, c.norm_eps), d.llama)
            logits = ops.einsum(x, p["output"], out=(d.B, d.S, d.V))
            return ctx.loss(logits, data["labels"], data["mask"], d.llama)

        return Stages(embed=lambda p, data, ctx: ctx.embed(data["tokens"], p["tok_embeddings"],
                                                           d.llama),
                      block=block, head=head, embed_params=("tok_embeddings",),
                      head_params=("norm", "output"))

    def tp_layer_plan(self, tp: int) -> dict[str, dict[str, Placement]]:
        """Per-layer placements over tp: attention as Llama's (heads split), router and norms
        replicated, routed experts column/row-parallel over ``FE`` (Megatron's ETP = TP), the
        shared expert over ``FS``.

        Raises:
            PlanError: tp splits neither the KV heads nor the query groups.
        """
        from spec_lang.models.llama import llama  # noqa: PLC0415

        c, d = self.config, self.dims
        out: dict[str, dict[str, Placement]] = {}
        if c.attention:
            lp = llama(replace(c.llama(), n_layers=1)).tp_layer_plan(tp)
            out.update({k: v for k, v in lp.items()
                        if k.startswith("attn.") or k == "attention_norm"})
        out.update({
            "ffn_norm": replicated(), "moe.router": replicated(),
            "moe.experts.w1": colwise(d.FE), "moe.experts.w3": colwise(d.FE),
            "moe.experts.w2": rowwise(d.FE),
        })
        if c.n_shared_experts:
            out.update({"moe.shared.w1": colwise(d.FS), "moe.shared.w3": colwise(d.FS),
                        "moe.shared.w2": rowwise(d.FS)})
        return out

    def tp_outer_plan(self) -> dict[str, dict[str, Placement]]:
        """Vocab-parallel embedding and head, the final norm replicated."""
        return {"tok_embeddings": colwise(self.dims.V), "norm": replicated(),
                "output": colwise(self.dims.V)}

    tp_region_weights: ClassVar[tuple[str, ...]] = (
        "attn.wq", "attn.wk", "attn.wv", "attn.wo", "moe.experts.w1", "moe.experts.w3",
        "moe.experts.w2", "moe.shared.w1", "moe.shared.w3", "moe.shared.w2")
    """Layer weights consumed inside a TP region (between ``f`` and ``g``)."""


def moe(config: MoEConfig) -> MoEModel:
    """The MoE model of ``config``; parameters in order: embedding, layers, norm, head.

    Raises:
        SpecError: inconsistent sizes (top_k > E, heads not dividing hidden, unknown gating).
    """
    c = config
    if not 1 <= c.top_k <= c.n_routed_experts:
        raise SpecError(f"{c.name}: top_k={c.top_k} must be in 1..{c.n_routed_experts}")
    if c.gating not in ("sigmoid", "softmax"):
        raise SpecError(f"{c.name}: gating {c.gating!r}: use 'sigmoid' or 'softmax'")
    if c.attention and (c.n_heads % c.n_kv_heads or c.hidden % c.n_heads):
        raise SpecError(f"{c.name}: heads must divide hidden and kv heads divide heads")
    d = MoEDims.of(c)
    params: dict[str, tuple[Dim, ...]] = {"tok_embeddings": (d.V, d.H)}
    data: dict[str, Data] = {"tokens": index(d.B, d.S, range=d.V),
                             "labels": index(d.B, d.S, range=d.V), "mask": mask(d.B, d.S)}
    for i in range(c.n_layers):
        pre = f"layers.{i}."
        if c.attention:
            params[pre + "attention_norm"] = (d.H,)
            params[pre + "attn.wq"] = (d.H, d.KVH, d.G, d.HD)
            params[pre + "attn.wk"] = (d.H, d.KVH, d.HD)
            params[pre + "attn.wv"] = (d.H, d.KVH, d.HD)
            params[pre + "attn.wo"] = (d.KVH, d.G, d.HD, d.H)
        params[pre + "ffn_norm"] = (d.H,)
        params[pre + "moe.router"] = (d.H, d.E)
        params[pre + "moe.experts.w1"] = (d.E, d.H, d.FE)
        params[pre + "moe.experts.w3"] = (d.E, d.H, d.FE)
        params[pre + "moe.experts.w2"] = (d.E, d.FE, d.H)
        if c.n_shared_experts:
            params[pre + "moe.shared.w1"] = (d.H, d.FS)
            params[pre + "moe.shared.w3"] = (d.H, d.FS)
            params[pre + "moe.shared.w2"] = (d.FS, d.H)
        if c.gating == "sigmoid" and c.balance_bias:
            data[pre + "moe.e_score_correction_bias"] = real(d.E)
    params["norm"] = (d.H,)
    params["output"] = (d.H, d.V)
    return MoEModel(c, d, params, data)
