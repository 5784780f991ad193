"""A Llama 3 decoder in the shape of torchtitan's ``torchtitan/models/llama3/model``
(written for this project, not copied): RMSNorm, rotary embeddings, grouped-query causal
attention, SwiGLU, untied embedding and output head, ``nn.ModuleDict`` of layers.

One deliberate difference: the rotary embedding is the real (cos, sin) rotate-half form that
torchtitan's Qwen3 and most Hugging Face models use, with the tables as non-persistent buffers;
torchtitan's Llama 3 multiplies by ``view_as_complex`` instead, which the front end does not lower
(``docs/torch.md``, "What gives UNKNOWN").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class ModelArgs:
    """Sizes and constants (the names torchtitan's ``TransformerModelArgs`` uses)."""

    dim: int = 4096
    n_layers: int = 32
    n_heads: int = 32
    n_kv_heads: int = 8
    vocab_size: int = 128256
    ffn_hidden: int = 14336          # torchtitan derives it from dim / multiple_of
    norm_eps: float = 1e-5
    rope_theta: float = 500000.0
    max_seq_len: int = 8192


def precompute_rope(head_dim: int, seq_len: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables (seq_len, head_dim) of the rotate-half rotary embedding."""
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
    angles = torch.outer(torch.arange(seq_len).float(), freqs)
    emb = torch.cat([angles, angles], dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rotary_emb(xq: torch.Tensor, xk: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """xq: (bs, seqlen, n_heads, head_dim), cos/sin: (seqlen, head_dim)."""
    cos = cos[None, :, None, :]
    sin = sin[None, :, None, :]
    return xq * cos + rotate_half(xq) * sin, xk * cos + rotate_half(xk) * sin


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(bs, seqlen, n_kv_heads, head_dim) -> (bs, seqlen, n_kv_heads * n_rep, head_dim)."""
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return (x[:, :, :, None, :].expand(bs, slen, n_kv_heads, n_rep, head_dim)
            .reshape(bs, slen, n_kv_heads * n_rep, head_dim))


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.n_heads = args.n_heads
        self.n_kv_heads = args.n_kv_heads
        self.n_rep = self.n_heads // self.n_kv_heads
        self.head_dim = args.dim // args.n_heads
        self.wq = nn.Linear(args.dim, args.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(args.n_heads * self.head_dim, args.dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        bs, seqlen, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        # -1: the local number of heads under tensor parallelism (as torchtitan)
        xq = xq.view(bs, seqlen, -1, self.head_dim)
        xk = xk.view(bs, seqlen, -1, self.head_dim)
        xv = xv.view(bs, seqlen, -1, self.head_dim)
        xq, xk = apply_rotary_emb(xq, xk, cos, sin)
        keys = repeat_kv(xk, self.n_rep)
        values = repeat_kv(xv, self.n_rep)
        xq, xk, xv = xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2)
        out = F.scaled_dot_product_attention(xq, xk, xv, is_causal=True)
        out = out.transpose(1, 2).contiguous().view(bs, seqlen, -1)
        return self.wo(out)


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden_dim: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, layer_id: int, args: ModelArgs):
        super().__init__()
        self.layer_id = layer_id
        self.attention = Attention(args)
        self.feed_forward = FeedForward(args.dim, args.ffn_hidden)
        self.attention_norm = nn.RMSNorm(args.dim, eps=args.norm_eps)
        self.ffn_norm = nn.RMSNorm(args.dim, eps=args.norm_eps)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), cos, sin)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim)
        cos, sin = precompute_rope(args.dim // args.n_heads, args.max_seq_len, args.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.layers = nn.ModuleDict({str(i): TransformerBlock(i, args)
                                     for i in range(args.n_layers)})
        self.norm = nn.RMSNorm(args.dim, eps=args.norm_eps)
        self.output = nn.Linear(args.dim, args.vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.tok_embeddings(tokens)
        for layer in self.layers.values():
            h = layer(h, self.rope_cos, self.rope_sin)
        return self.output(self.norm(h))
