"""HSDP on the debug MoE model: Mesh(dp_replicate=2, dp_shard=2), AdamW.

Model: spec_lang.models.moe.MOE_DEBUG at batch 8 (1 layer, hidden 8, 2 / 1 heads, 4 routed
experts + 1 shared, top-2, DeepSeek-V3 sigmoid gating with the selection-only bias, normalised
top-k weights, routed scaling 2.5, load-balancing aux loss alpha = 0.01).

Plan (spec_lang/plans/library.py: moe_hsdp): parameters Shard over dp_shard, replicated over
dp_replicate; the batch split over both; all-gather over dp_shard before use (backward:
reduce-scatter); 1/(|dp_replicate| |dp_shard|) and an all-reduce over dp_replicate; routing
counts over both axes. Expected: EQUIVALENT.
"""

import dataclasses

from spec_lang import AdamW
from spec_lang.models.moe import MOE_DEBUG, moe
from spec_lang.plans.library import moe_hsdp

model = moe(dataclasses.replace(MOE_DEBUG, batch=8))
spec = model.spec(AdamW())
plan = moe_hsdp(model, replicate=2, shard=2)
