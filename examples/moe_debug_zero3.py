"""ZeRO-3 on the debug MoE model: dp2, global-norm gradient clipping at 1/2, AdamW.

Model: spec_lang.models.moe.MOE_DEBUG at batch 8 (1 layer, hidden 8, 2 / 1 heads, 4 routed
experts + 1 shared, top-2, DeepSeek-V3 sigmoid gating with the selection-only bias, normalised
top-k weights, routed scaling 2.5, load-balancing aux loss alpha = 0.01).

Plan (spec_lang/plans/library.py: moe_zero3): parameters, gradients and AdamW state Shard over
dp; all-gathered before use (declared backward: reduce-scatter); the global squared norm is the
sum of the shards' squares all-reduced over dp. Expected: EQUIVALENT.
"""

import dataclasses
from fractions import Fraction

from spec_lang import AdamW
from spec_lang.models.moe import MOE_DEBUG, moe
from spec_lang.plans.library import moe_zero3

model = moe(dataclasses.replace(MOE_DEBUG, batch=8))
spec = model.spec(AdamW(), clip_grad_norm=Fraction(1, 2))
plan = moe_zero3(model, dp=2, clip=True)
