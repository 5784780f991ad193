"""ZeRO-1 on the debug Llama: dp2, AdamW.

Model: spec_lang.models.DEBUG at batch 8 (2 layers, hidden 16, 4 query / 2 KV heads, F 24, V 32).

Plan (spec_lang/plans/sharded_dp.py: zero1): parameters replicated; gradients averaged and
all-reduced over dp, then each rank keeps its block along the first dim 2 divides; AdamW state
and step on the block; the parameters all-gathered after the step. Expected: EQUIVALENT.
"""

import dataclasses

from spec_lang import AdamW
from spec_lang.models import DEBUG, llama
from spec_lang.plans.sharded_dp import zero1

model = llama(dataclasses.replace(DEBUG, batch=8))
spec = model.spec(AdamW())
plan = zero1(model, dp=2)
