"""Debug Llama (batch 8) under HSDP on Mesh(dp_replicate=2, dp_shard=2) (torchtitan's axes).

Hybrid sharding (PyTorch FSDP ``HYBRID_SHARD`` / FSDP2 ``fully_shard(mesh=2-D)``): parameters are
``Shard`` over ``dp_shard`` (first dim) and replicated over ``dp_replicate``; the batch is split
over both. The forward all-gathers each parameter over ``dp_shard`` (declared backward: the
reduce-scatter over ``dp_shard``); ``reduce_grads`` averages (1 / (|dp_replicate| |dp_shard|))
and all-reduces over ``dp_replicate``; AdamW updates the shards.
"""

import dataclasses

from spec_lang import AdamW
from spec_lang.models import DEBUG, llama
from spec_lang.plans.sharded_dp import hsdp

model = llama(dataclasses.replace(DEBUG, batch=8))
spec = model.spec(AdamW())
plan = hsdp(model, replicate=2, shard=2)
