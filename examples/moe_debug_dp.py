"""Data parallelism (Megatron-LM DDP) on the debug MoE model: dp4, 2 micro-batches, AdamW.

Model: spec_lang.models.moe.MOE_DEBUG at batch 8 (1 layer, hidden 8, 2 / 1 heads, 4 routed
experts + 1 shared, top-2, DeepSeek-V3 sigmoid gating with the selection-only bias, normalised
top-k weights, routed scaling 2.5, load-balancing aux loss alpha = 0.01).

Plan (spec_lang/plans/library.py: moe_megatron with tp=1): every parameter replicated; the
batch Shard(B) over dp, then 2 micro-batches; routing counts all-reduced over mb and dp (the
global f_e); the seed is dp*K/N*S_mb*(1/K) + alpha*A_r*dp*K*(1/K); gradients summed over the
micro-batches, scaled 1/dp and all-reduced over dp. Expected: EQUIVALENT.
"""

import dataclasses

from spec_lang import AdamW
from spec_lang.models.moe import MOE_DEBUG, moe
from spec_lang.plans.library import moe_megatron

model = moe(dataclasses.replace(MOE_DEBUG, batch=8))
spec = model.spec(AdamW())
plan = moe_megatron(model, tp=1, dp=4, microbatches=2)
