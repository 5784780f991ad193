"""Llama-style decoder split into CheckFree pipeline stages.

Dims: B batch (sequences), T tokens per sequence, C model width, H query heads, K key/value heads,
D = C / H head width, F SwiGLU hidden width, V vocabulary.

Architecture (Llama, Touvron et al. 2023; nanoGPT/torchtitan layout): pre-norm blocks
x + attn(rmsnorm(x)), x + swiglu(rmsnorm(x)); RMSNorm; rotary position embedding with real
cos/sin tables; grouped-query causal attention; untied token embedding and output head; no
biases, no dropout.

Staging (CheckFree, arXiv 2506.15461, section 4; published code `convergence_training.py`):
stage 0 is the "embedding stage" holding the token embedding, the final norm and the head; it
runs first (`embed`) and last (`head`). Stages 1..S are `TransformerStage`s of L blocks each and
all have identical parameter names and shapes, so they can be averaged and copied.

Every parameter is created with `torch.empty` and filled from an explicit `torch.Generator`, so
building a model never touches torch's global RNG.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from trainer.api import TrainerConfig

__all__ = [
    "RMSNorm",
    "rope_tables",
    "apply_rope",
    "Attention",
    "SwiGLU",
    "Block",
    "EmbeddingStage",
    "TransformerStage",
    "Llama",
    "init_embedding_stage",
    "init_transformer_stage",
    "stage_forward_flops",
]

INIT_STD = 0.02  # GPT-2 / nanoGPT model.py `_init_weights`
ROPE_THETA = 10_000.0  # RoFormer (Su et al. 2021), Llama 2
NORM_EPS = 1e-5  # Llama 2 `norm_eps`


class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x^2, C) + eps) * w  (Zhang & Sennrich 2019). x: (..., C) -> (..., C)."""

    def __init__(self, dim: int, eps: float = NORM_EPS):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(context: int, head_dim: int, theta: float = ROPE_THETA) -> tuple[torch.Tensor, torch.Tensor]:
    """Real cos/sin tables of rotary embedding (RoFormer eq. 34), rotate-half layout.

    freq_j = theta^(-2j/D), j < D/2; angle[t, j] = t * freq_j. Returns cos, sin: (T, D) with the
    D/2 angles repeated twice, matching `apply_rope`'s halves.
    """
    freqs = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)  # (D/2,)
    angles = torch.outer(torch.arange(context, dtype=torch.float64), freqs)  # (T, D/2)
    angles = torch.cat([angles, angles], dim=-1)  # (T, D)
    return angles.cos().float(), angles.sin().float()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (x_j, x_{j+D/2}) by angle[t, j]. x: (B, heads, T, D); cos, sin: (T, D)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)  # (B, heads, T, D)
    return x * cos + rotated * sin


class Attention(nn.Module):
    """Causal grouped-query self-attention (Ainslie et al. 2023). x: (B, T, C) -> (B, T, C).

    q = x wq^T: (B, H, T, D); k, v = x wk^T, x wv^T: (B, K, T, D), each key/value head shared by
    H/K query heads; softmax(q k^T / sqrt(D) + causal mask) v, then wo.
    """

    def __init__(self, config: TrainerConfig):
        super().__init__()
        c, h, k = config.d_model, config.n_heads, config.n_kv_heads
        self.n_heads, self.n_kv_heads, self.head_dim = h, k, c // h
        self.wq = nn.Parameter(torch.empty(h * self.head_dim, c))
        self.wk = nn.Parameter(torch.empty(k * self.head_dim, c))
        self.wv = nn.Parameter(torch.empty(k * self.head_dim, c))
        self.wo = nn.Parameter(torch.empty(c, h * self.head_dim))

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = F.linear(x, self.wq).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, T, D)
        k = F.linear(x, self.wk).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, K, T, D)
        v = F.linear(x, self.wv).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, K, T, D)
        q, k = apply_rope(q, cos[:t], sin[:t]), apply_rope(k, cos[:t], sin[:t])
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.n_heads != self.n_kv_heads)
        y = y.transpose(1, 2).reshape(b, t, self.n_heads * self.head_dim)  # (B, T, C)
        return F.linear(y, self.wo)


class SwiGLU(nn.Module):
    """y = w2 (silu(w1 x) * w3 x) (Shazeer 2020). x: (B, T, C) -> (B, T, C) via (B, T, F)."""

    def __init__(self, config: TrainerConfig):
        super().__init__()
        c, f = config.d_model, config.ffn_hidden
        self.w1 = nn.Parameter(torch.empty(f, c))
        self.w3 = nn.Parameter(torch.empty(f, c))
        self.w2 = nn.Parameter(torch.empty(c, f))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(F.silu(F.linear(x, self.w1)) * F.linear(x, self.w3), self.w2)


class Block(nn.Module):
    """Pre-norm decoder layer: x += attn(norm(x)); x += mlp(norm(x)). x: (B, T, C) -> (B, T, C)."""

    def __init__(self, config: TrainerConfig):
        super().__init__()
        self.attn_norm = RMSNorm(config.d_model)
        self.attn = Attention(config)
        self.mlp_norm = RMSNorm(config.d_model)
        self.mlp = SwiGLU(config)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class EmbeddingStage(nn.Module):
    """CheckFree stage 0: token embedding (V, C), final RMSNorm (C,) and untied head (V, C).

    `embed(idx)`: (B, T) int64 -> (B, T, C) activations; `logits(h)`: (B, T, C) -> (B, T, V).
    """

    def __init__(self, config: TrainerConfig):
        super().__init__()
        self.tok_embedding = nn.Parameter(torch.empty(config.vocab_size, config.d_model))
        self.norm = RMSNorm(config.d_model)
        self.head = nn.Parameter(torch.empty(config.vocab_size, config.d_model))

    def embed(self, idx: torch.Tensor) -> torch.Tensor:
        return F.embedding(idx, self.tok_embedding)

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(self.norm(h), self.head)


class TransformerStage(nn.Module):
    """One pipeline stage of L decoder blocks. x: (B, T, C) -> (B, T, C).

    The RoPE tables are non-persistent buffers, so `state_dict()` holds exactly the trainable
    weights (what CheckFree averages and copies).
    """

    def __init__(self, config: TrainerConfig):
        super().__init__()
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers_per_stage))
        cos, sin = rope_tables(config.context, config.d_model // config.n_heads)
        self.register_buffer("rope_cos", cos, persistent=False)  # (T, D)
        self.register_buffer("rope_sin", sin, persistent=False)  # (T, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x, self.rope_cos, self.rope_sin)
        return x


class Llama(nn.Module):
    """The same decoder as one module: embed, S*L blocks, norm, head. idx: (B, T) -> logits (B, T, V).

    Reference for the staged trainer (tests, bench): `load_stages` copies stage weights in, so
    the two compute the same function with the same parameters.
    """

    def __init__(self, config: TrainerConfig):
        super().__init__()
        self.embedding = EmbeddingStage(config)
        self.stages = nn.ModuleList(TransformerStage(config) for _ in range(config.n_stages))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        h = self.embedding.embed(idx)
        for stage in self.stages:
            h = stage(h)
        return self.embedding.logits(h)

    @torch.no_grad()
    def load_stages(self, stages: list[nn.Module]) -> None:
        """Copy weights from [EmbeddingStage, TransformerStage x S] (a PipelineTrainer's stages)."""
        self.embedding.load_state_dict(stages[0].state_dict())
        for mine, theirs in zip(self.stages, stages[1:], strict=True):
            mine.load_state_dict(theirs.state_dict())


def _residual_std(config: TrainerConfig) -> float:
    # GPT-2 scaling of residual output projections by 1/sqrt(2 * n_layers) (nanoGPT model.py).
    return INIT_STD / math.sqrt(2 * config.n_stages * config.layers_per_stage)


@torch.no_grad()
def init_embedding_stage(stage: EmbeddingStage, generator: torch.Generator) -> None:
    """Embedding and head ~ N(0, 0.02^2); norm weight = 1 (nanoGPT `_init_weights`)."""
    nn.init.normal_(stage.tok_embedding, 0.0, INIT_STD, generator=generator)
    nn.init.normal_(stage.head, 0.0, INIT_STD, generator=generator)
    stage.norm.weight.fill_(1.0)


@torch.no_grad()
def init_transformer_stage(stage: TransformerStage, config: TrainerConfig, generator: torch.Generator) -> None:
    """Matrices ~ N(0, 0.02^2), residual projections wo, w2 ~ N(0, (0.02/sqrt(2 S L))^2); norms = 1."""
    for block in stage.blocks:
        for w in (block.attn.wq, block.attn.wk, block.attn.wv, block.mlp.w1, block.mlp.w3):
            nn.init.normal_(w, 0.0, INIT_STD, generator=generator)
        for w in (block.attn.wo, block.mlp.w2):
            nn.init.normal_(w, 0.0, _residual_std(config), generator=generator)
        block.attn_norm.weight.fill_(1.0)
        block.mlp_norm.weight.fill_(1.0)


def stage_forward_flops(config: TrainerConfig) -> tuple[float, ...]:
    """Forward FLOPs per micro-batch for stages 0..S (multiply-add = 2 FLOPs).

    Matmuls: 2 * tokens * weights; attention scores and weighted sum: 2 * 2 * B * T^2 * C per layer
    (full T^2, as nanoGPT `estimate_mfu` and Kaplan et al. 2020 count it). Norms, RoPE, softmax
    and the embedding lookup are ignored (O(B T C)). Stage 0 = head matmul only.
    """
    b, t, c = config.micro_batch_size, config.context, config.d_model
    tokens = b * t
    kv = config.n_kv_heads * (c // config.n_heads)
    layer_weights = 2 * c * c + 2 * c * kv + 3 * c * config.ffn_hidden  # wq, wo, wk, wv, w1, w2, w3
    layer = 2.0 * tokens * layer_weights + 4.0 * b * t * t * c
    head = 2.0 * tokens * c * config.vocab_size
    return (head,) + (layer * config.layers_per_stage,) * config.n_stages
