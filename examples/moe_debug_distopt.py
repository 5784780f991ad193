"""Megatron-LM TP x DP with the distributed optimizer on the debug MoE model: tp2 x dp2, K=2.

Model: spec_lang.models.moe.MOE_DEBUG at batch 8 (1 layer, hidden 8, 2 / 1 heads, 4 routed
experts + 1 shared, top-2, DeepSeek-V3 sigmoid gating with the selection-only bias, normalised
top-k weights, routed scaling 2.5, load-balancing aux loss alpha = 0.01).

Plan (spec_lang/plans/library.py: distributed_optimizer): Megatron's MoE TP layout (see
moe_debug_megatron.py); parameters replicated over dp; the gradient averaged over dp and
reduce-scattered along each parameter's first dim tp does not split; AdamW state and step on
the rank's dp block; the updated blocks all-gathered over dp. Expected: EQUIVALENT.
"""

import dataclasses

from spec_lang import AdamW
from spec_lang.models.moe import MOE_DEBUG, moe
from spec_lang.plans.library import distributed_optimizer

model = moe(dataclasses.replace(MOE_DEBUG, batch=8))
spec = model.spec(AdamW())
plan = distributed_optimizer(model, tp=2, dp=2, microbatches=2)
