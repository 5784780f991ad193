"""Megatron-LM TP x DP with the distributed optimizer on the debug Llama: tp2 x dp2, K=2.

Model: spec_lang.models.DEBUG at batch 8 (2 layers, hidden 16, 4 query / 2 KV heads, F 24, V 32).

Plan (spec_lang/plans/library.py: distributed_optimizer -> sharded_dp.fsdp_tp at stage 2):
Megatron's TP layout (docs/plans.md); parameters replicated over dp; the gradient averaged over
dp and reduce-scattered along each parameter's first dim tp does not split; AdamW state and
step on the rank's block; the updated blocks all-gathered over dp. Expected: EQUIVALENT.
"""

import dataclasses

from spec_lang import AdamW
from spec_lang.models import DEBUG, llama
from spec_lang.plans.library import distributed_optimizer

model = llama(dataclasses.replace(DEBUG, batch=8))
spec = model.spec(AdamW())
plan = distributed_optimizer(model, tp=2, dp=2, microbatches=2)
