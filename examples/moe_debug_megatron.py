"""Megatron-LM TP x DP on the debug MoE model: tp2 x dp2, 2 micro-batches, AdamW.

Model: spec_lang.models.moe.MOE_DEBUG at batch 8 (1 layer, hidden 8, 2 / 1 heads, 4 routed
experts + 1 shared, top-2, DeepSeek-V3 sigmoid gating with the selection-only bias, normalised
top-k weights, routed scaling 2.5, load-balancing aux loss alpha = 0.01).

Plan (spec_lang/plans/library.py: moe_megatron; docs/parallelism/plan-library.md): Megatron's
TP layout for attention (1 KV head < tp: wk/wv replicated, entering the TP region through f on
the weight; query groups split), vocab-parallel embedding / head / cross-entropy; the routed
experts tensor-parallel over FE (ETP = TP: w1/w3 column-, w2 row-parallel), the tokens entering
them through f and leaving through g; the shared expert column/row-parallel over FS; the router
replicated. Routing counts are all-reduced over mb and dp; alpha*A_r gets the loss's factors
dp*K and 1/K; gradients 1/dp then all-reduce over dp. Expected: EQUIVALENT.
"""

import dataclasses

from spec_lang import AdamW
from spec_lang.models.moe import MOE_DEBUG, moe
from spec_lang.plans.library import moe_megatron

model = moe(dataclasses.replace(MOE_DEBUG, batch=8))
spec = model.spec(AdamW())
plan = moe_megatron(model, tp=2, dp=2, microbatches=2)
