"""Qwen2 as a spec: the Llama architecture with biases on the q/k/v projections.

Sources: the Qwen2 technical report (Yang et al. 2024, arXiv 2407.10671, sec. 2.2.1: "QKV bias
for attention", GQA, SwiGLU, RMSNorm, RoPE with base 1,000,000) and the released ``config.json``
files: Qwen2-7B = hidden 3584, 28 layers, 28 / 4 heads (head dim 128), FFN 18944, vocab 152064,
RMSNorm eps 1e-6, untied head; Qwen2-0.5B = hidden 896, 24 layers, 14 / 2 heads (head dim 64),
FFN 4864, vocab 151936, tied embedding and head. ``q_proj``, ``k_proj``, ``v_proj`` carry
biases; ``o_proj`` and the MLP do not.

The model *is* :class:`~spec_lang.models.llama.LlamaModel` with ``qkv_bias=True`` (biases
``attn.wq.bias (KVH, G, HD)``, ``attn.wk.bias``, ``attn.wv.bias (KVH, HD)``, column-parallel
with their weights in ``tp_layer_plan``) and, for the small sizes, ``tie_embeddings=True`` (the head is
``tok_embeddings``; the vocab-parallel head and embedding share one ``Shard(V)`` table), so every
Llama plan builder runs it.
"""

from __future__ import annotations

from fractions import Fraction

from spec_lang.models.llama import LlamaConfig, LlamaModel, llama

__all__ = ["QWEN2_7B", "QWEN2_0_5B", "QWEN2_DEBUG", "qwen2"]

QWEN2_7B = LlamaConfig(name="qwen2_7b", hidden=3584, n_layers=28, n_heads=28, n_kv_heads=4,
                       ffn_hidden=18944, vocab=152064, rope_theta=1000000,
                       norm_eps=Fraction(1, 10**6), batch=8, seq=4096, qkv_bias=True)
"""Qwen2-7B (module docstring; the tech report pre-trains at sequence length 4096, sec. 3.1)."""

QWEN2_0_5B = LlamaConfig(name="qwen2_0_5b", hidden=896, n_layers=24, n_heads=14, n_kv_heads=2,
                         ffn_hidden=4864, vocab=151936, rope_theta=1000000,
                         norm_eps=Fraction(1, 10**6), batch=8, seq=4096, qkv_bias=True,
                         tie_embeddings=True)
"""Qwen2-0.5B: tied embedding and head."""

QWEN2_DEBUG = LlamaConfig(name="qwen2_debug", hidden=16, n_layers=2, n_heads=4, n_kv_heads=2,
                          ffn_hidden=24, vocab=32, rope_theta=1000000,
                          norm_eps=Fraction(1, 10**6), batch=4, seq=8, qkv_bias=True,
                          tie_embeddings=True)
"""A 2-layer Qwen2 (q/k/v biases, tied head) for tests."""


def qwen2(config: LlamaConfig) -> LlamaModel:
    """The Qwen2 model of ``config`` (a Llama model with ``qkv_bias=True``).

    Raises:
        SpecError: a config without q/k/v biases (use :func:`spec_lang.models.llama.llama`), or
            sizes that do not divide (heads, kv heads).
    """
    from spec_lang.errors import SpecError  # noqa: PLC0415

    if not config.qkv_bias:
        raise SpecError(f"{config.name}: a Qwen2 config has qkv_bias=True")
    return llama(config)
