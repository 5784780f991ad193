"""GPT-2 as a spec: LayerNorm with bias, tanh-GELU MLP, learned positions, tied embedding and head.

Sources: OpenAI's GPT-2 (Radford et al. 2019, "Language Models are Unsupervised Multitask
Learners", sec. 2.3: pre-norm blocks, a final LayerNorm, vocabulary 50257, context 1024) and its
reference ``model.py`` (``gelu`` is the tanh form; ``c_attn`` / ``c_proj`` / ``c_fc`` carry
biases); Megatron-LM's GPT (``megatron/core/models/gpt``: learned absolute positions, the output
layer sharing the word embedding, vocabulary padded to a multiple of 128 x tp,
``--make-vocab-size-divisible-by``); nanoGPT ``model.py`` (``GPTConfig``: 124M = 12 layers,
12 heads, 768 wide, vocab padded to 50304 "for efficiency").

Weights carry head dims so that no reshape is needed (``NH`` heads of ``HD``; GPT-2's fused
``c_attn (H, 3H)`` is stored as its three named column blocks, the same parameters)::

    wte (V, H)  wpe (S, H)              embedding and tied output head; learned positions
    ln_1.weight, ln_1.bias, ln_2.weight, ln_2.bias, ln_f.weight, ln_f.bias (H,)
    attn.q.weight, attn.k.weight, attn.v.weight (H, NH, HD)    c_attn's three column blocks
    attn.q.bias, attn.k.bias, attn.v.bias (NH, HD)
    attn.proj.weight (NH, HD, H)  attn.proj.bias (H,)          c_proj
    mlp.fc.weight (H, F)  mlp.fc.bias (F,)                     c_fc
    mlp.proj.weight (F, H)  mlp.proj.bias (H,)                 c_proj

Names follow PyTorch's ``Linear.weight`` / ``.bias``, so the parameter-group recipes
(:mod:`spec_lang.param_groups`) find every bias by its suffix.

The blocks take the Llama :class:`~spec_lang.models.llama.ParallelContext` hooks (``enter_tp``,
``exit_tp``, ``embed``, ``head_input``, ``loss``) plus ``positions`` (the learned position table
on its way into the residual stream: Megatron scatters it into sequence shards under SP), so the
plan builders of :mod:`spec_lang.plans` run it unchanged (the model protocol,
:mod:`spec_lang.models.protocol`). A row-parallel bias (``attn.proj.bias``, ``mlp.proj.bias``)
is added
*after* ``exit_tp``, as Megatron's ``RowParallelLinear`` adds it after the all-reduce: it is
replicated and its gradient complete on every rank.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

from spec_lang import ops
from spec_lang.dims import Dim
from spec_lang.errors import PlanError, SpecError
from spec_lang.models.llama import ParallelContext, SpecContext
from spec_lang.models.protocol import Stages, caller_site, colwise, replicated, rowwise
from spec_lang.placement import Placement
from spec_lang.spec import Data, Params, index, mask
from spec_lang.tensor import Tensor

__all__ = ["GPT2Config", "GPT2_SMALL", "GPT2_DEBUG", "GPT2Dims", "GPT2Model", "gpt2",
           "gpt2_attention", "gpt2_mlp", "gpt2_block", "gpt2_forward"]


@dataclass(frozen=True, kw_only=True, slots=True)
class GPT2Config:
    """Sizes and constants of a GPT-2 model (exact constants).

    Attributes:
        vocab: V, padded (GPT-2's 50257 tokens padded to 50304 = 393 x 128, Megatron's
            ``--make-vocab-size-divisible-by 128`` and nanoGPT's choice; the padding rows are
            never a label).
        seq: S, the context (GPT-2: 1024); ``wpe`` has one row per position.
        gelu: ``"tanh"`` (GPT-2's) or ``"none"`` (the erf form; :func:`spec_lang.ops.gelu`).
        tie_embeddings: the output head is ``wte`` (GPT-2); False adds an untied ``lm_head``.
    """

    name: str
    hidden: int                # H
    n_layers: int
    n_heads: int               # NH
    ffn_hidden: int            # F (GPT-2: 4 H)
    vocab: int                 # V
    seq: int = 1024            # S
    batch: int = 8             # B
    norm_eps: Any = Fraction(1, 10**5)
    gelu: str = "tanh"
    tie_embeddings: bool = True

    @property
    def head_dim(self) -> int:
        return self.hidden // self.n_heads


GPT2_SMALL = GPT2Config(name="gpt2", hidden=768, n_layers=12, n_heads=12, ffn_hidden=3072,
                        vocab=50304, seq=1024, batch=8)
"""GPT-2 124M (Radford et al. 2019, table 2, smallest row; nanoGPT's ``GPTConfig``)."""

GPT2_DEBUG = GPT2Config(name="gpt2_debug", hidden=16, n_layers=2, n_heads=4, ffn_hidden=32,
                        vocab=32, seq=8, batch=4)
"""A 2-layer GPT-2 for tests and the tutorial."""


@dataclass(frozen=True, slots=True)
class GPT2Dims:
    """The named dims of GPT-2: ``B S T H NH HD F V``."""

    B: Dim   # batch (sequences)
    S: Dim   # positions (queries)
    T: Dim   # key positions (S renamed for attention scores)
    H: Dim   # hidden
    NH: Dim  # heads
    HD: Dim  # head dim
    F: Dim   # MLP hidden
    V: Dim   # vocab (padded)

    @staticmethod
    def of(c: GPT2Config) -> GPT2Dims:
        return GPT2Dims(B=Dim("B", c.batch), S=Dim("S", c.seq), T=Dim("T", c.seq),
                        H=Dim("H", c.hidden), NH=Dim("NH", c.n_heads), HD=Dim("HD", c.head_dim),
                        F=Dim("F", c.ffn_hidden), V=Dim("V", c.vocab))


def _positions(ctx: ParallelContext, wpe: Tensor, d: GPT2Dims) -> Tensor:
    hook = getattr(ctx, "positions", None)
    return hook(wpe, d) if hook is not None else wpe


def gpt2_attention(p: Params, x: Tensor, c: GPT2Config, d: GPT2Dims, ctx: ParallelContext
                   ) -> Tensor:
    """Causal multi-head self-attention with biases (GPT-2's ``c_attn`` / ``c_proj``).

    x: (B, S, H) -> (B, S, H). q, k, v = x w + b: (B, S, NH, HD); scores = q k^T / sqrt(HD):
    (B, NH, S, T); causal softmax over T; out = (p v) wo + bo (bo after ``exit_tp``).
    """
    h = ctx.enter_tp(x, d)
    q = ops.einsum(h, p["q.weight"], out=(d.B, d.S, d.NH, d.HD)) + p["q.bias"]
    k = ops.einsum(h, p["k.weight"], out=(d.B, d.S, d.NH, d.HD)) + p["k.bias"]
    v = ops.einsum(h, p["v.weight"], out=(d.B, d.S, d.NH, d.HD)) + p["v.bias"]
    k = ops.rename(k, d.S, d.T)                                       # (B, T, NH, HD)
    v = ops.rename(v, d.S, d.T)                                       # (B, T, NH, HD)
    scores = ops.einsum(q, k, out=(d.B, d.NH, d.S, d.T)) * ops.rsqrt(ops.dim_size(d.HD))
    probs = ops.softmax(scores, d.T, mask=ops.causal_mask(d.S, d.T))
    o = ops.einsum(probs, v, out=(d.B, d.S, d.NH, d.HD))
    y = ops.einsum(o, p["proj.weight"], out=(d.B, d.S, d.H))
    return ctx.exit_tp(y, d) + p["proj.bias"]


def gpt2_mlp(p: Params, x: Tensor, c: GPT2Config, d: GPT2Dims, ctx: ParallelContext) -> Tensor:
    """``gelu(x w_fc + b_fc) w_proj + b_proj``; x: (B, S, H), w_fc: (H, F), w_proj: (F, H)."""
    h = ctx.enter_tp(x, d)
    a = ops.gelu(ops.einsum(h, p["fc.weight"], out=(d.B, d.S, d.F)) + p["fc.bias"],
                 approximate=c.gelu)
    y = ops.einsum(a, p["proj.weight"], out=(d.B, d.S, d.H))
    return ctx.exit_tp(y, d) + p["proj.bias"]


def gpt2_block(p: Params, x: Tensor, c: GPT2Config, d: GPT2Dims, ctx: ParallelContext
               ) -> Tensor:
    """Pre-norm block ``x + attn(ln_1(x))``, then ``+ mlp(ln_2(.))``; (B, S, H). Marks the
    layer boundaries ``<scope>`` and ``<scope>.out``."""
    x = ops.layer_boundary(x, p.prefix.rstrip("."))
    h = x + gpt2_attention(p.scope("attn"), ops.layer_norm(x, p["ln_1.weight"], p["ln_1.bias"],
                                                           d.H, c.norm_eps), c, d, ctx)
    out = h + gpt2_mlp(p.scope("mlp"), ops.layer_norm(h, p["ln_2.weight"], p["ln_2.bias"],
                                                      d.H, c.norm_eps), c, d, ctx)
    return ops.layer_boundary(out, p.prefix + "out")


def gpt2_embed(p: Params, data: Mapping[str, Tensor], c: GPT2Config, d: GPT2Dims,
               ctx: ParallelContext) -> Tensor:
    """Token embedding plus learned positions: ``wte[tokens] + wpe``, (B, S, H)."""
    return ctx.embed(data["tokens"], p["wte"], d) + _positions(ctx, p["wpe"], d)


def gpt2_head(p: Params, x: Tensor, data: Mapping[str, Tensor], c: GPT2Config, d: GPT2Dims,
              ctx: ParallelContext) -> Tensor:
    """Final LayerNorm, the (tied) head ``logits = x wte^T`` (B, S, V), ``ctx.loss``."""
    x = ctx.head_input(ops.layer_norm(x, p["ln_f.weight"], p["ln_f.bias"], d.H, c.norm_eps), d)
    head = p["wte"] if c.tie_embeddings else p["lm_head"]
    logits = ops.einsum(x, head, out=(d.B, d.S, d.V))
    return ctx.loss(logits, data["labels"], data["mask"], d)


def gpt2_forward(p: Params, data: Mapping[str, Tensor], c: GPT2Config, d: GPT2Dims,
                 ctx: ParallelContext, layers: range | None = None) -> Tensor:
    """Embedding + positions, the blocks, final LayerNorm, tied head, masked token-mean CE."""
    x = gpt2_embed(p, data, c, d, ctx)
    for i in layers if layers is not None else range(c.n_layers):
        x = gpt2_block(p.scope(f"layers.{i}"), x, c, d, ctx)
    return gpt2_head(p, x, data, c, d, ctx)


_LAYER_PARAMS = ("ln_1.weight", "ln_1.bias", "attn.q.weight", "attn.q.bias", "attn.k.weight",
                 "attn.k.bias", "attn.v.weight", "attn.v.bias", "attn.proj.weight",
                 "attn.proj.bias", "ln_2.weight", "ln_2.bias", "mlp.fc.weight", "mlp.fc.bias",
                 "mlp.proj.weight", "mlp.proj.bias")


@dataclass(frozen=True)
class GPT2Model:
    """A GPT-2 spec; follows the model protocol (:mod:`spec_lang.models.protocol`)."""

    config: GPT2Config
    dims: GPT2Dims
    params: dict[str, tuple[Dim, ...]] = field(repr=False)
    data: dict[str, Data] = field(repr=False)

    def forward(self, p: Params, data: Mapping[str, Tensor],
                ctx: ParallelContext | None = None) -> Tensor:
        """The loss; ``ctx`` defaults to :class:`SpecContext`."""
        return gpt2_forward(p, data, self.config, self.dims, ctx or SpecContext())

    def spec(self, optimizer: Any, **kw: Any) -> Any:
        """A :class:`~spec_lang.spec.Spec` of one training iteration with ``optimizer``."""
        from spec_lang.spec import Spec  # noqa: PLC0415

        return Spec(params=self.params, data=self.data, forward=self.forward,
                    optimizer=optimizer, **kw)

    # -- the model protocol (spec_lang/models/protocol.py) ----------------------------------------
    def stages(self) -> Stages:
        """Embedding, blocks and head as separate pieces (pipeline plans cut between them)."""
        c, d = self.config, self.dims
        return Stages(
            embed=lambda p, data, ctx: gpt2_embed(p, data, c, d, ctx),
            block=lambda i, p, x, data, ctx: (gpt2_block(p.scope(f"layers.{i}"), x, c, d, ctx),
                                              None),
            head=lambda p, x, data, ctx: gpt2_head(p, x, data, c, d, ctx),
            embed_params=("wte", "wpe"),
            head_params=("ln_f.weight", "ln_f.bias")
            + (("wte",) if c.tie_embeddings else ("lm_head",)),
        )

    def tp_layer_plan(self, tp: int) -> dict[str, dict[str, Placement]]:
        """Megatron's layout of one block over ``tp`` (keys relative to ``layers.{i}.``):
        q/k/v column-parallel over the heads (their biases with them), ``c_proj`` row-parallel
        (its bias replicated, added after the all-reduce), ``c_fc`` column- and the MLP
        projection row-parallel over ``F``; norms replicated.

        Raises:
            PlanError: ``tp`` does not divide the heads and ``F``.
        """
        c, d = self.config, self.dims
        if c.n_heads % tp or c.ffn_hidden % tp:
            raise PlanError(f"{caller_site()}: {c.name}: tp={tp} must divide the {c.n_heads} "
                            f"heads and the MLP width {c.ffn_hidden}")
        return {
            "ln_1.weight": replicated(), "ln_1.bias": replicated(),
            "attn.q.weight": colwise(d.NH), "attn.q.bias": colwise(d.NH),
            "attn.k.weight": colwise(d.NH), "attn.k.bias": colwise(d.NH),
            "attn.v.weight": colwise(d.NH), "attn.v.bias": colwise(d.NH),
            "attn.proj.weight": rowwise(d.NH), "attn.proj.bias": replicated(),
            "ln_2.weight": replicated(), "ln_2.bias": replicated(),
            "mlp.fc.weight": colwise(d.F), "mlp.fc.bias": colwise(d.F),
            "mlp.proj.weight": rowwise(d.F), "mlp.proj.bias": replicated(),
        }

    def tp_outer_plan(self) -> dict[str, dict[str, Placement]]:
        """Non-layer parameters over tp: vocab-parallel ``wte`` (embedding and tied head),
        replicated positions and final norm."""
        out = {"wte": colwise(self.dims.V), "wpe": replicated(),
               "ln_f.weight": replicated(), "ln_f.bias": replicated()}
        if not self.config.tie_embeddings:
            out["lm_head"] = colwise(self.dims.V)
        return out

    tp_region_weights: ClassVar[tuple[str, ...]] = (
        "attn.q.weight", "attn.q.bias", "attn.k.weight", "attn.k.bias", "attn.v.weight",
        "attn.v.bias", "attn.proj.weight", "mlp.fc.weight", "mlp.fc.bias", "mlp.proj.weight")
    """Layer weights consumed inside a TP region (between ``f`` and ``g``)."""


def gpt2(config: GPT2Config) -> GPT2Model:
    """The GPT-2 model of ``config``; parameters in order: ``wte``, ``wpe``, layers, ``ln_f``.

    Raises:
        SpecError: heads not dividing the width, an unknown GELU form.
    """
    c = config
    if c.hidden % c.n_heads:
        raise SpecError(f"{c.name}: {c.n_heads} heads must divide the width {c.hidden}")
    if c.gelu not in ("tanh", "none"):
        raise SpecError(f"{c.name}: gelu={c.gelu!r}: 'tanh' (GPT-2) or 'none' (erf)")
    d = GPT2Dims.of(c)
    qkv, qkv_b = (d.H, d.NH, d.HD), (d.NH, d.HD)
    shapes = {"ln_1.weight": (d.H,), "ln_1.bias": (d.H,),
              "attn.q.weight": qkv, "attn.q.bias": qkv_b, "attn.k.weight": qkv,
              "attn.k.bias": qkv_b, "attn.v.weight": qkv, "attn.v.bias": qkv_b,
              "attn.proj.weight": (d.NH, d.HD, d.H), "attn.proj.bias": (d.H,),
              "ln_2.weight": (d.H,), "ln_2.bias": (d.H,),
              "mlp.fc.weight": (d.H, d.F), "mlp.fc.bias": (d.F,), "mlp.proj.weight": (d.F, d.H),
              "mlp.proj.bias": (d.H,)}
    params: dict[str, tuple[Dim, ...]] = {"wte": (d.V, d.H), "wpe": (d.S, d.H)}
    for i in range(c.n_layers):
        for k in _LAYER_PARAMS:
            params[f"layers.{i}.{k}"] = shapes[k]
    params["ln_f.weight"] = (d.H,)
    params["ln_f.bias"] = (d.H,)
    if not c.tie_embeddings:
        params["lm_head"] = (d.H, d.V)
    data = {"tokens": index(d.B, d.S, range=d.V), "labels": index(d.B, d.S, range=d.V),
            "mask": mask(d.B, d.S)}
    return GPT2Model(c, d, params, data)
