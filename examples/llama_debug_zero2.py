"""ZeRO-2 on the debug Llama: dp2, 2 micro-batches, AdamW.

Model: spec_lang.models.DEBUG at batch 8 (2 layers, hidden 16, 4 query / 2 KV heads, F 24, V 32).

Plan (spec_lang/plans/sharded_dp.py: zero2): gradients averaged and reduce-scattered over dp
after the micro-batch accumulation; AdamW state and step on the rank's block; parameters
all-gathered after the step. Expected: EQUIVALENT.
"""

import dataclasses

from spec_lang import AdamW
from spec_lang.models import DEBUG, llama
from spec_lang.plans.sharded_dp import zero2

model = llama(dataclasses.replace(DEBUG, batch=8))
spec = model.spec(AdamW())
plan = zero2(model, dp=2, microbatches=2)
