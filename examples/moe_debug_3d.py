"""torchtitan 3-D (FSDP x TP x PP) on a 2-layer debug MoE model: dp2 x tp2 x pp2, 1F1B, K=2.

Model: spec_lang.models.moe.MOE_DEBUG with 2 layers, batch 8 (see moe_debug_megatron.py).

Plan (spec_lang/plans/torchtitan.py: torchtitan_3d): stage 0 holds the embedding and layer 0,
stage 1 layer 1, the final norm, the head and the loss; activations sent point-to-point; 1F1B
over 2 micro-batches; inside each stage Megatron TP (experts ETP = TP) and FSDP over dp (every
held parameter all-gathered before use, reduce-scattered in backward, 1/dp). Layer 0's
load-balancing term is added to the loss on stage 0 (Megatron's MoEAuxLossAutoScaler).
Expected: EQUIVALENT.
"""

import dataclasses

from spec_lang import AdamW
from spec_lang.models.moe import MOE_DEBUG, moe
from spec_lang.plans.torchtitan import torchtitan_3d

model = moe(dataclasses.replace(MOE_DEBUG, batch=8, n_layers=2))
spec = model.spec(AdamW())
plan = torchtitan_3d(model, dp=2, tp=2, pp=2, microbatches=2)
