"""torchtitan 2-D (FSDP x TP) on the debug MoE model: dp2 x tp2, AdamW.

Model: spec_lang.models.moe.MOE_DEBUG at batch 8 (1 layer, hidden 8, 2 / 1 heads, 4 routed
experts + 1 shared, top-2, DeepSeek-V3 sigmoid gating with the selection-only bias, normalised
top-k weights, routed scaling 2.5, load-balancing aux loss alpha = 0.01).

Plan (spec_lang/plans/torchtitan.py: torchtitan_2d -> library.moe_fsdp_tp): Megatron's MoE TP
layout inside (experts ETP = TP over FE, shared expert over FS, attention heads, vocab-parallel
embedding / head / loss), FSDP over dp outside (each parameter Shard over dp along its first dim
tp does not split, all-gathered before use); the seed carries dp/N and alpha*A_r*dp; 1/dp on
the gradient. Expected: EQUIVALENT.
"""

import dataclasses

from spec_lang import AdamW
from spec_lang.models.moe import MOE_DEBUG, moe
from spec_lang.plans.torchtitan import torchtitan_2d

model = moe(dataclasses.replace(MOE_DEBUG, batch=8))
spec = model.spec(AdamW())
plan = torchtitan_2d(model, dp=2, tp=2)
