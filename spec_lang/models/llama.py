"""Llama 3 as a spec: RMSNorm, RoPE, grouped-query causal attention, SwiGLU, untied head.

Sources: Meta's Llama 3 reference ``model.py`` and the model cards (``docs/ANCHORS.md``, "Real
model configurations": 8B = hidden 4096, 32 layers, 32 heads / 8 KV heads, FFN 14336, vocab
128256, RoPE theta 500000, RMSNorm eps 1e-5; :data:`LLAMA3_70B` and :data:`LLAMA31_405B` from the
same table).

Weights carry head dims so that no reshape is needed (GQA: ``G = heads / kv_heads`` query
heads share one KV head)::

    attn.wq (H, KVH, G, HD)   attn.wk, attn.wv (H, KVH, HD)   attn.wo (KVH, G, HD, H)
    mlp.w1, mlp.w3 (H, F)     mlp.w2 (F, H)
    tok_embeddings (V, H)     output (H, V)    attention_norm, ffn_norm, norm (H,)

Blocks take a :class:`ParallelContext`: the spec passes :class:`SpecContext` (identity hooks);
a Megatron plan passes a context whose hooks insert regions (``enter_tp`` = copy_to_tp /
gather_from_sp, ``exit_tp`` = reduce_from_tp / reduce_scatter_to_sp) and feeds tp-local weights
(``Shard(KVH)`` for attention, ``Shard(F)`` for the MLP): the block code is the same, because
every op names its dims.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

from spec_lang import ops
from spec_lang.dims import Dim
from spec_lang.errors import PlanError, SpecError
from spec_lang.models.protocol import Stages, caller_site, colwise, replicated, rowwise
from spec_lang.placement import Placement
from spec_lang.spec import Data, Params, index, mask
from spec_lang.tensor import Tensor

__all__ = ["LlamaConfig", "LLAMA3_8B", "LLAMA3_70B", "LLAMA31_405B", "DEBUG", "LlamaDims",
           "LlamaModel", "ParallelContext",
           "SpecContext", "llama", "attention", "feed_forward", "transformer_block",
           "llama_head", "llama_forward"]


@dataclass(frozen=True, kw_only=True, slots=True)
class LlamaConfig:
    """Sizes and constants of a Llama model (exact constants; see ``docs/ANCHORS.md``)."""

    name: str
    hidden: int                # H, model width
    n_layers: int
    n_heads: int               # query heads = KVH * G
    n_kv_heads: int            # KVH
    ffn_hidden: int            # F
    vocab: int                 # V
    rope_theta: Any = 500000
    norm_eps: Any = Fraction(1, 10**5)
    batch: int = 1             # B, sequences per global batch
    seq: int = 8192            # S, tokens per sequence
    qkv_bias: bool = False     # biases on q/k/v (Qwen2, spec_lang.models.qwen2)
    tie_embeddings: bool = False  # the head is tok_embeddings (Qwen2-0.5B, Llama 3.2 1B)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.n_heads


LLAMA3_8B = LlamaConfig(name="llama3_8b", hidden=4096, n_layers=32, n_heads=32, n_kv_heads=8,
                        ffn_hidden=14336, vocab=128256, rope_theta=500000,
                        norm_eps=Fraction(1, 10**5), batch=8, seq=8192)
"""Llama-3-8B (docs/ANCHORS.md, "Real model configurations" row)."""

LLAMA3_70B = LlamaConfig(name="llama3_70b", hidden=8192, n_layers=80, n_heads=64, n_kv_heads=8,
                         ffn_hidden=28672, vocab=128256, rope_theta=500000,
                         norm_eps=Fraction(1, 10**5), batch=2048, seq=8192)
"""Llama-3-70B (docs/ANCHORS.md, "Real model configurations" row: hidden 8192, 80 layers, 64 / 8
heads, FFN 28672, vocab 128256; RoPE theta 500000 and RMSNorm eps 1e-5 as the Llama 3 family).
Batch: 2048 sequences of 8192 tokens (16M tokens, the Llama 3 paper's final pre-training batch,
sec. 3.4.1; the 70B batch is not published separately); plans choose their own with
``dataclasses.replace``."""

LLAMA31_405B = LlamaConfig(name="llama31_405b", hidden=16384, n_layers=126, n_heads=128,
                           n_kv_heads=8, ffn_hidden=53248, vocab=128256, rope_theta=500000,
                           norm_eps=Fraction(1, 10**5), batch=2048, seq=8192)
"""Llama-3.1-405B (docs/ANCHORS.md, "Real model configurations" row: hidden 16384, 126 layers,
128 / 8 heads, FFN 53248, vocab 128256, RoPE theta 500000, RMSNorm eps 1e-5; trained with TP 8,
PP 16, DP 64 at seq 8192). Batch: 2048 sequences of 8192 tokens = 16M tokens (Llama 3 paper
sec. 3.4.1) = DP 64 x 32 sequences. The Llama 3.1 RoPE frequency scaling (long context) is not
part of this config."""

DEBUG = LlamaConfig(name="debug", hidden=16, n_layers=2, n_heads=4, n_kv_heads=2, ffn_hidden=24,
                    vocab=32, rope_theta=10000, norm_eps=Fraction(1, 10**5), batch=4, seq=8)
"""A 2-layer model with kv heads < q heads, for tests."""


@dataclass(frozen=True, slots=True)
class LlamaDims:
    """The named dims of a Llama model: ``B S T H KVH G HD HD_half F V``."""

    B: Dim   # batch (sequences)
    S: Dim   # sequence (query positions)
    T: Dim   # key positions (S renamed for attention scores; same size)
    H: Dim   # hidden
    KVH: Dim  # key/value heads
    G: Dim   # query heads per kv head
    HD: Dim  # head dim
    HD_half: Dim  # half head dim (RoPE tables)
    F: Dim   # FFN hidden
    V: Dim   # vocab

    @staticmethod
    def of(c: LlamaConfig) -> LlamaDims:
        hd = Dim("HD", c.head_dim)
        return LlamaDims(B=Dim("B", c.batch), S=Dim("S", c.seq), T=Dim("T", c.seq),
                         H=Dim("H", c.hidden), KVH=Dim("KVH", c.n_kv_heads),
                         G=Dim("G", c.n_heads // c.n_kv_heads), HD=hd, HD_half=hd.half(),
                         F=Dim("F", c.ffn_hidden), V=Dim("V", c.vocab))


class ParallelContext:
    """Hooks where a parallel plan changes the block code. Subclass and override.

    The spec's context (:class:`SpecContext`) is the identity everywhere.
    """

    def enter_tp(self, x: Tensor, d: LlamaDims) -> Tensor:
        """Before column-parallel matmuls (wq/wk/wv, w1/w3). x: (B, S, H)."""
        return x

    def exit_tp(self, x: Tensor, d: LlamaDims) -> Tensor:
        """After row-parallel matmuls (wo, w2). x: (B, S, H), Partial over tp in a TP plan."""
        return x

    def embed(self, tokens: Tensor, table: Tensor, d: LlamaDims) -> Tensor:
        """tokens (B, S) in [0, V), table (V, H) -> (B, S, H)."""
        return ops.embedding(tokens, table, d.V)

    def head_input(self, x: Tensor, d: LlamaDims) -> Tensor:
        """After the final norm, before the output head. x: (B, S, H)."""
        return x

    def loss(self, logits: Tensor, labels: Tensor, mask_: Tensor, d: LlamaDims) -> Tensor:
        """Masked token mean of cross-entropy: ``sum(mask * ce) / sum(mask)`` (scalar)."""
        return ops.cross_entropy(logits, labels, mask_, d.V)


class SpecContext(ParallelContext):
    """The single-device context: every hook is the identity."""


def attention(p: Params, x: Tensor, c: LlamaConfig, d: LlamaDims, ctx: ParallelContext
              ) -> Tensor:
    """Grouped-query causal self-attention with RoPE.

    x: (B, S, H) -> (B, S, H).  q = x wq: (B, S, KVH, G, HD); k, v = x wk, x wv: (B, S, KVH, HD)
    (plus the biases wq.bias (KVH, G, HD), wk.bias, wv.bias (KVH, HD) with ``config.qkv_bias``:
    Qwen2);
    scores = q k^T / sqrt(HD): (B, KVH, G, S, T); causal softmax over T; out = p v wo.
    """
    h = ctx.enter_tp(x, d)
    q = ops.einsum(h, p["wq"], out=(d.B, d.S, d.KVH, d.G, d.HD))
    k = ops.einsum(h, p["wk"], out=(d.B, d.S, d.KVH, d.HD))
    v = ops.einsum(h, p["wv"], out=(d.B, d.S, d.KVH, d.HD))
    if c.qkv_bias:                                                  # Qwen2: q/k/v biases
        q, k, v = q + p["wq.bias"], k + p["wk.bias"], v + p["wv.bias"]
    q = ops.rope(q, d.S, d.HD, d.HD_half, c.rope_theta)
    k = ops.rope(k, d.S, d.HD, d.HD_half, c.rope_theta)
    k = ops.rename(k, d.S, d.T)                                     # (B, T, KVH, HD)
    v = ops.rename(v, d.S, d.T)                                     # (B, T, KVH, HD)
    scores = ops.einsum(q, k, out=(d.B, d.KVH, d.G, d.S, d.T))
    scores = scores * ops.rsqrt(ops.dim_size(d.HD))
    probs = ops.softmax(scores, d.T, mask=ops.causal_mask(d.S, d.T))
    o = ops.einsum(probs, v, out=(d.B, d.S, d.KVH, d.G, d.HD))
    y = ops.einsum(o, p["wo"], out=(d.B, d.S, d.H))
    return ctx.exit_tp(y, d)


def feed_forward(p: Params, x: Tensor, d: LlamaDims, ctx: ParallelContext) -> Tensor:
    """SwiGLU: ``(silu(x w1) * (x w3)) w2``; x: (B, S, H), w1/w3: (H, F), w2: (F, H)."""
    h = ctx.enter_tp(x, d)
    a = ops.silu(ops.einsum(h, p["w1"], out=(d.B, d.S, d.F)))
    b = ops.einsum(h, p["w3"], out=(d.B, d.S, d.F))
    y = ops.einsum(a * b, p["w2"], out=(d.B, d.S, d.H))
    return ctx.exit_tp(y, d)


def transformer_block(p: Params, x: Tensor, c: LlamaConfig, d: LlamaDims,
                      ctx: ParallelContext) -> Tensor:
    """Pre-norm residual block: ``x + attn(norm(x))``, then ``+ mlp(norm(.))``; (B, S, H).

    Marks its input and output as layer boundaries ``<scope>`` and ``<scope>.out`` (e.g.
    ``layers.3`` / ``layers.3.out``; :func:`spec_lang.ops.layer_boundary`)."""
    x = ops.layer_boundary(x, p.prefix.rstrip("."))
    h = x + attention(p.scope("attn"), ops.rms_norm(x, p["attention_norm"], d.H, c.norm_eps),
                      c, d, ctx)
    out = h + feed_forward(p.scope("mlp"), ops.rms_norm(h, p["ffn_norm"], d.H, c.norm_eps),
                           d, ctx)
    return ops.layer_boundary(out, p.prefix + "out")


def llama_head(p: Params, x: Tensor, data: Mapping[str, Tensor], c: LlamaConfig, d: LlamaDims,
               ctx: ParallelContext) -> Tensor:
    """Final norm, head (``output``, or ``tok_embeddings`` when tied), ``ctx.loss``."""
    x = ctx.head_input(ops.rms_norm(x, p["norm"], d.H, c.norm_eps), d)
    head = p["tok_embeddings"] if c.tie_embeddings else p["output"]
    logits = ops.einsum(x, head, out=(d.B, d.S, d.V))
    return ctx.loss(logits, data["labels"], data["mask"], d)


def llama_forward(p: Params, data: Mapping[str, Tensor], c: LlamaConfig, d: LlamaDims,
                  ctx: ParallelContext, layers: range | None = None) -> Tensor:
    """Embedding, ``n_layers`` blocks, final norm, head, masked token-mean cross-entropy."""
    x = ctx.embed(data["tokens"], p["tok_embeddings"], d)
    for i in layers if layers is not None else range(c.n_layers):
        x = transformer_block(p.scope(f"layers.{i}"), x, c, d, ctx)
    return llama_head(p, x, data, c, d, ctx)


@dataclass(frozen=True)
class LlamaModel:
    """A Llama spec: config, dims, parameters, data and the forward with a context hook."""

    config: LlamaConfig
    dims: LlamaDims
    params: dict[str, tuple[Dim, ...]] = field(repr=False)
    data: dict[str, Data] = field(repr=False)

    def forward(self, p: Params, data: Mapping[str, Tensor],
                ctx: ParallelContext | None = None) -> Tensor:
        """The loss; ``ctx`` defaults to :class:`SpecContext`."""
        return llama_forward(p, data, self.config, self.dims, ctx or SpecContext())

    def spec(self, optimizer: Any, **kw: Any) -> Any:
        """A :class:`~spec_lang.spec.Spec` of one training iteration with ``optimizer``."""
        from spec_lang.spec import Spec  # noqa: PLC0415

        return Spec(params=self.params, data=self.data, forward=self.forward,
                    optimizer=optimizer, **kw)

    # -- the model protocol (spec_lang/models/protocol.py) ----------------------------------------
    def stages(self) -> Stages:
        """Embedding, blocks and head as pieces for pipeline stages."""
        c, d = self.config, self.dims
        return Stages(
            embed=lambda p, data, ctx: ctx.embed(data["tokens"], p["tok_embeddings"], d),
            block=lambda i, p, x, data, ctx: (
                transformer_block(p.scope(f"layers.{i}"), x, c, d, ctx), None),
            head=lambda p, x, data, ctx: llama_head(p, x, data, c, d, ctx),
            embed_params=("tok_embeddings",),
            head_params=("norm", "tok_embeddings" if c.tie_embeddings else "output"))

    def tp_layer_plan(self, tp: int) -> dict[str, dict[str, Placement]]:
        """Megatron's per-layer placements over ``tp``: heads split (the KV heads when
        ``kv_heads % tp == 0``, else the query groups ``G`` with replicated KV projections),
        ``F`` split for the MLP, norms replicated; q/k/v biases follow their weights.

        Raises:
            PlanError: neither the KV heads nor the query groups divide over tp.
        """
        c, d = self.config, self.dims
        kvh, g = c.n_kv_heads, c.n_heads // c.n_kv_heads
        if kvh % tp == 0:
            heads, kv = d.KVH, colwise(d.KVH)
        elif tp % kvh == 0 and kvh < tp and g % tp == 0:
            heads, kv = d.G, replicated()
        else:
            raise PlanError(
                f"{caller_site()}: {c.name}: tp={tp} splits neither the {kvh} KV heads "
                f"(kv_heads % tp != 0) nor the {g} query heads per KV head (needs kv_heads < tp "
                f"and G % tp == 0); choose tp dividing {kvh}, or one dividing {g} with tp > {kvh}")
        out = {
            "attention_norm": replicated(),
            "attn.wq": colwise(heads), "attn.wk": kv, "attn.wv": kv, "attn.wo": rowwise(heads),
            "ffn_norm": replicated(),
            "mlp.w1": colwise(d.F), "mlp.w3": colwise(d.F), "mlp.w2": rowwise(d.F),
        }
        if c.qkv_bias:
            out.update({"attn.wq.bias": colwise(heads), "attn.wk.bias": dict(kv),
                        "attn.wv.bias": dict(kv)})
        return out

    def tp_outer_plan(self) -> dict[str, dict[str, Placement]]:
        """Vocab-parallel embedding and head (``Shard(V)``), the final norm replicated."""
        out = {"tok_embeddings": colwise(self.dims.V), "norm": replicated()}
        if not self.config.tie_embeddings:
            out["output"] = colwise(self.dims.V)
        return out

    tp_region_weights: ClassVar[tuple[str, ...]] = (
        "attn.wq", "attn.wk", "attn.wv", "attn.wo", "attn.wq.bias", "attn.wk.bias",
        "attn.wv.bias", "mlp.w1", "mlp.w2", "mlp.w3")
    """Layer weights consumed inside a TP region (between ``f`` and ``g``)."""


def llama(config: LlamaConfig) -> LlamaModel:
    """The Llama model of ``config`` (parameters in a fixed order: embedding, layers, norm, head)."""
    d = LlamaDims.of(config)
    if config.n_heads % config.n_kv_heads or config.hidden % config.n_heads:
        raise SpecError(f"{config.name}: heads must divide hidden and kv heads divide heads")
    params: dict[str, tuple[Dim, ...]] = {"tok_embeddings": (d.V, d.H)}
    for i in range(config.n_layers):
        pre = f"layers.{i}."
        params[pre + "attention_norm"] = (d.H,)
        params[pre + "attn.wq"] = (d.H, d.KVH, d.G, d.HD)
        params[pre + "attn.wk"] = (d.H, d.KVH, d.HD)
        params[pre + "attn.wv"] = (d.H, d.KVH, d.HD)
        params[pre + "attn.wo"] = (d.KVH, d.G, d.HD, d.H)
        if config.qkv_bias:
            params[pre + "attn.wq.bias"] = (d.KVH, d.G, d.HD)
            params[pre + "attn.wk.bias"] = (d.KVH, d.HD)
            params[pre + "attn.wv.bias"] = (d.KVH, d.HD)
        params[pre + "ffn_norm"] = (d.H,)
        params[pre + "mlp.w1"] = (d.H, d.F)
        params[pre + "mlp.w3"] = (d.H, d.F)
        params[pre + "mlp.w2"] = (d.F, d.H)
    params["norm"] = (d.H,)
    if not config.tie_embeddings:
        params["output"] = (d.H, d.V)
    data = {"tokens": index(d.B, d.S, range=d.V), "labels": index(d.B, d.S, range=d.V),
            "mask": mask(d.B, d.S)}
    return LlamaModel(config, d, params, data)
