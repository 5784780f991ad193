"""Llama-3-8B (32 layers, hidden 4096, 32 / 8 heads, FFN 14336, vocab 128256) under Megatron-LM.

TP8 x DP4 with 4 micro-batches of gradient accumulation; forward, backward and AdamW. Per layer
(``spec_lang.plans.layer_plan``): wq/wk/wv column-parallel over the 8 KV heads (one per tp rank,
with its 4 query heads), wo row-parallel over them; w1/w3 column-parallel and w2 row-parallel
over F; norms replicated. The embedding is vocab-parallel, the head column-parallel over V with
vocab-parallel cross-entropy. The batch is split over dp, then into micro-batches of
``micro_batch_size`` sequences of 8192 tokens (global batch = dp x K x micro_batch_size).

``build(dp=64, tp=8, microbatches=16)`` gives the larger configurations of the benchmark.
"""

from dataclasses import replace

from spec_lang import AdamW
from spec_lang.models import LLAMA3_8B, llama
from spec_lang.plans import megatron


def build(dp=4, tp=8, microbatches=4, *, n_layers=32, micro_batch_size=1):
    """(spec, plan) for Llama-3-8B at real widths; ``n_layers`` < 32 gives a shallower variant."""
    config = replace(LLAMA3_8B, n_layers=n_layers, batch=dp * microbatches * micro_batch_size)
    model = llama(config)
    return model.spec(AdamW()), megatron(model, tp=tp, dp=dp, microbatches=microbatches)


spec, plan = build()
