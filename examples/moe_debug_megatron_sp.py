"""Megatron-LM TP + sequence parallelism x DP on the debug MoE model: tp2 x dp2, 2 micro-batches.

Model: spec_lang.models.moe.MOE_DEBUG at batch 8 (1 layer, hidden 8, 2 / 1 heads, 4 routed
experts + 1 shared, top-2, DeepSeek-V3 sigmoid gating with the selection-only bias, normalised
top-k weights, routed scaling 2.5, load-balancing aux loss alpha = 0.01).

Plan (spec_lang/plans/library.py: moe_megatron(sp=True)): Megatron requires SP for MoE with TP.
The residual stream, norms and router run on the rank's S/tp tokens; attention, the experts
(the allgather token dispatcher: all-gather S into the experts, reduce-scatter S out) and the
shared expert enter / leave their TP regions by all-gather / reduce-scatter along S. The
router's and the norms' gradients are Partial over tp (derived from their placement and the
traced gradient) and all-reduced over tp; routing counts are all-reduced over mb, dp and tp;
alpha*A_r is summed over dp and tp. Expected: EQUIVALENT.
"""

import dataclasses

from spec_lang import AdamW
from spec_lang.models.moe import MOE_DEBUG, moe
from spec_lang.plans.library import moe_megatron

model = moe(dataclasses.replace(MOE_DEBUG, batch=8))
spec = model.spec(AdamW())
plan = moe_megatron(model, tp=2, dp=2, microbatches=2, sp=True)
