"""FSDP on the debug MoE model: dp2, 2 micro-batches, AdamW.

Model: spec_lang.models.moe.MOE_DEBUG at batch 8 (1 layer, hidden 8, 2 / 1 heads, 4 routed
experts + 1 shared, top-2, DeepSeek-V3 sigmoid gating with the selection-only bias, normalised
top-k weights, routed scaling 2.5, load-balancing aux loss alpha = 0.01).

Plan (spec_lang/plans/library.py: moe_fsdp, ZeRO-3's dataflow): every parameter Shard over dp
along its first dim that 2 divides (torch's Shard(0) where it can: attn.wo (KVH=1, G, HD, H)
is split along G; an explicit Shard(KVH) is a PlanError naming the parameter); all-gathered
before use; FSDP's average 1/dp on the reduce-scattered gradient; AdamW on the shards.
Expected: EQUIVALENT.
"""

import dataclasses

from spec_lang import AdamW
from spec_lang.models.moe import MOE_DEBUG, moe
from spec_lang.plans.library import moe_fsdp

model = moe(dataclasses.replace(MOE_DEBUG, batch=8))
spec = model.spec(AdamW())
plan = moe_fsdp(model, dp=2, microbatches=2)
