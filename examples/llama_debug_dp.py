"""Data parallelism (Megatron-LM DDP) on the debug Llama: dp4, 2 micro-batches, AdamW.

Model: spec_lang.models.DEBUG at batch 8 (2 layers, hidden 16, 4 query / 2 KV heads, F 24, V 32).

Plan (spec_lang/plans/megatron.py with tp=1): every parameter replicated; the batch Shard(B)
over dp, then 2 micro-batches; the seed dp*K/N*S_mb*(1/K); gradients summed over the
micro-batches, scaled 1/dp and all-reduced over dp. Expected: EQUIVALENT.
"""

import dataclasses

from spec_lang import AdamW
from spec_lang.models import DEBUG, llama
from spec_lang.plans import megatron

model = llama(dataclasses.replace(DEBUG, batch=8))
spec = model.spec(AdamW())
plan = megatron(model, tp=1, dp=4, microbatches=2)
