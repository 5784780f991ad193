"""Megatron-LM 3-D (TP x PP x DP) on the debug Llama: tp2 x pp2 x dp2, 1F1B, 2 micro-batches.

Model: spec_lang.models.DEBUG at batch 8 (2 layers, hidden 16, 4 query / 2 KV heads, F 24, V 32).

Plan (spec_lang/plans/torchtitan.py: megatron_3d): the pipeline of llama_debug_3d.py with DDP
instead of FSDP: parameters replicated over dp; after the 1F1B accumulation each gradient is
scaled 1/dp and all-reduced over dp. Expected: EQUIVALENT.
"""

import dataclasses

from spec_lang import AdamW
from spec_lang.models import DEBUG, llama
from spec_lang.plans.torchtitan import megatron_3d

model = llama(dataclasses.replace(DEBUG, batch=8))
spec = model.spec(AdamW())
plan = megatron_3d(model, tp=2, dp=2, pp=2, microbatches=2)
