"""Llama-3-8B (32 layers, hidden 4096, 32 / 8 heads, FFN 14336, vocab 128256) under Megatron-LM.

TP8 x DP4 with 4 micro-batches of gradient accumulation; forward, backward and AdamW. Each tp
rank holds one KV head with its 4 query heads and 1/8 of the FFN; the embedding is
vocab-parallel and the head column-parallel over V into the vocab-parallel cross-entropy
(``docs/plans.md``). The global batch is dp x K x ``micro_batch_size`` sequences of 8192 tokens.
``build(dp=64, tp=8, microbatches=16)`` gives the benchmark's larger configurations.
"""

from dataclasses import replace

from spec_lang import AdamW
from spec_lang.models import LLAMA3_8B, llama
from spec_lang.plans import colwise, megatron, replicated, rowwise


def build(dp=4, tp=8, microbatches=4, *, n_layers=32, micro_batch_size=1):
    """(spec, plan) at real widths; ``n_layers`` < 32 gives a shallower variant."""
    config = replace(LLAMA3_8B, n_layers=n_layers, batch=dp * microbatches * micro_batch_size)
    model = llama(config)
    d = model.dims
    layer_plan = {
        "attention_norm": replicated(),
        "attn.wq": colwise(d.KVH), "attn.wk": colwise(d.KVH), "attn.wv": colwise(d.KVH),
        "attn.wo": rowwise(d.KVH),
        "ffn_norm": replicated(),
        "mlp.w1": colwise(d.F), "mlp.w3": colwise(d.F), "mlp.w2": rowwise(d.F),
    }
    plan = megatron(model, tp=tp, dp=dp, microbatches=microbatches, layers=layer_plan)
    return model.spec(AdamW()), plan


spec, plan = build()
