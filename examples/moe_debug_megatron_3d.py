"""Megatron-LM 3-D (TP x PP x DP) on a 2-layer debug MoE model: tp2 x pp2 x dp2, 1F1B, K=2.

Model: spec_lang.models.moe.MOE_DEBUG with 2 layers, batch 8 (see moe_debug_megatron.py).

Plan (spec_lang/plans/torchtitan.py: megatron_3d): the pipeline of moe_debug_3d.py with DDP
instead of FSDP: parameters replicated over dp; after the 1F1B accumulation each gradient is
scaled 1/dp and all-reduced over dp. Expected: EQUIVALENT.
"""

import dataclasses

from spec_lang import AdamW
from spec_lang.models.moe import MOE_DEBUG, moe
from spec_lang.plans.torchtitan import megatron_3d

model = moe(dataclasses.replace(MOE_DEBUG, batch=8, n_layers=2))
spec = model.spec(AdamW())
plan = megatron_3d(model, tp=2, dp=2, pp=2, microbatches=2)
