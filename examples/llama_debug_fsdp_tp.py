"""Debug Llama (batch 8) under torchtitan-style 2-D parallelism: FSDP over dp=2 x TP over tp=2.

Megatron TP inside (column-parallel wq/wk/wv/w1/w3 split over heads / F, row-parallel wo/w2,
vocab-parallel embedding, head and cross-entropy: ``spec_lang.plans.megatron``), FSDP outside:
each parameter is further ``Shard`` over dp along its first dim that tp does not split,
all-gathered over dp before use (declared backward: reduce-scatter over dp). The loss seed is
Megatron's (``dp*K/N`` and ``1/K``); ``reduce_grads`` applies FSDP's 1/dp. 2 micro-batches.
"""

import dataclasses

from spec_lang import AdamW
from spec_lang.models import DEBUG, llama
from spec_lang.plans.sharded_dp import fsdp_tp

model = llama(dataclasses.replace(DEBUG, batch=8))
spec = model.spec(AdamW())
plan = fsdp_tp(model, dp=2, tp=2, microbatches=2)
