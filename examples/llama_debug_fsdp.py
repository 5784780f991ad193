"""Debug Llama (2 layers, 4 query / 2 KV heads, batch 8) under FSDP over dp=2, 2 micro-batches.

PyTorch FSDP / ZeRO-3 (``docs/parallelism/sharded-data-parallel.md``): every parameter is
``Shard`` over dp along its first dim (torch's ``Shard(0)``); the forward all-gathers each one
before use (a region whose declared backward is the reduce-scatter), so each rank's gradient
arrives as its own block summed over dp; ``reduce_grads`` applies the 1/dp of FSDP's average
and AdamW updates each rank's shards in place (parameters and state stay sharded).
"""

import dataclasses

from spec_lang import AdamW
from spec_lang.models import DEBUG, llama
from spec_lang.plans.sharded_dp import ShardedDPSettings, fsdp

model = llama(dataclasses.replace(DEBUG, batch=8))
spec = model.spec(AdamW())
# the dim FSDP splits, per parameter: the first declared dim (torch's Shard(0))
shard = {name: dims[0] for name, dims in model.params.items()}
plan = fsdp(model, dp=2, microbatches=2, settings=ShardedDPSettings(stage=3, shard=shard))
