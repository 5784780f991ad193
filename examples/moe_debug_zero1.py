"""ZeRO-1 on the debug MoE model: dp2, AdamW.

Model: spec_lang.models.moe.MOE_DEBUG at batch 8 (1 layer, hidden 8, 2 / 1 heads, 4 routed
experts + 1 shared, top-2, DeepSeek-V3 sigmoid gating with the selection-only bias, normalised
top-k weights, routed scaling 2.5, load-balancing aux loss alpha = 0.01).

Plan (spec_lang/plans/library.py: moe_zero1, over spec_lang/plans/sharded_dp.py): parameters
replicated; gradients averaged and all-reduced over dp, then each rank keeps its block (first
dim that 2 divides: the experts split E); AdamW state and the step on the block; the parameters
all-gathered. Routing counts all-reduced over dp; alpha*A_r pre-multiplied by |dp|.
Expected: EQUIVALENT.
"""

import dataclasses

from spec_lang import AdamW
from spec_lang.models.moe import MOE_DEBUG, moe
from spec_lang.plans.library import moe_zero1

model = moe(dataclasses.replace(MOE_DEBUG, batch=8))
spec = model.spec(AdamW())
plan = moe_zero1(model, dp=2)
