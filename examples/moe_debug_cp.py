"""Megatron-LM context parallelism x DP on the debug MoE model: cp2 x dp2, AdamW.

Model: spec_lang.models.moe.MOE_DEBUG at batch 8 (1 layer, hidden 8, 2 / 1 heads, 4 routed
experts + 1 shared, top-2, DeepSeek-V3 sigmoid gating with the selection-only bias, normalised
top-k weights, routed scaling 2.5, load-balancing aux loss alpha = 0.01).

Plan (spec_lang/plans/library.py: moe_context_parallel, over spec_lang/plans/context_parallel.py):
the sequence cut into 2 cp load-balanced chunks (rank c holds chunks c and 2cp-1-c) for the
tokens, labels, mask, RoPE positions and causal mask; K/V all-gathered over cp (backward:
reduce-scatter); the MoE layer routes the rank's tokens (top-k along E commutes with the chunk
permutation of S: rule lift-perm-topk); routing counts all-reduced over cp and dp; the seed
S_r/N + alpha*A_r; gradients summed over cp then dp. Expected: EQUIVALENT.
"""

import dataclasses

from spec_lang import AdamW
from spec_lang.models.moe import MOE_DEBUG, moe
from spec_lang.plans.library import moe_context_parallel

model = moe(dataclasses.replace(MOE_DEBUG, batch=8))
spec = model.spec(AdamW())
plan = moe_context_parallel(model, cp=2, dp=2)
