"""torchtitan 3-D (FSDP x TP x PP) on the debug Llama: dp2 x tp2 x pp2, 1F1B, 2 micro-batches.

Model: spec_lang.models.DEBUG at batch 8 (2 layers, hidden 16, 4 query / 2 KV heads, F 24, V 32).

Plan (spec_lang/plans/torchtitan.py: torchtitan_3d): stage 0 holds the embedding and layer 0,
stage 1 layer 1, the final norm, the head and the loss; activations sent point-to-point; 1F1B
over 2 micro-batches; inside each stage Megatron TP (heads and F split, vocab-parallel
embedding / head / loss) and FSDP over dp (every held parameter all-gathered before use,
reduce-scattered in backward, 1/dp). Expected: EQUIVALENT.
"""

import dataclasses

from spec_lang import AdamW
from spec_lang.models import DEBUG, llama
from spec_lang.plans.torchtitan import torchtitan_3d

model = llama(dataclasses.replace(DEBUG, batch=8))
spec = model.spec(AdamW())
plan = torchtitan_3d(model, dp=2, tp=2, pp=2, microbatches=2)
