"""Debug Llama (batch 8) under ZeRO-3 over dp=4 with global-norm gradient clipping at 1/2.

DeepSpeed ZeRO stage 3 (Rajbhandari et al., SC'20, P_os+g+p): parameters, gradients and AdamW
state are ``Shard`` over dp along each parameter's first dim that 4 divides (``attn.wo``,
dims (KVH=2, G=2, HD=4, H), is split along HD; everything else along its first dim). Parameters are
all-gathered before use (declared backward: reduce-scatter); the global squared norm is the sum
of the shards' squares all-reduced over dp (every shard counted once); the spec's clipping and
AdamW then run on each rank's shards.
"""

import dataclasses
from fractions import Fraction

from spec_lang import AdamW
from spec_lang.models import DEBUG, llama
from spec_lang.plans.sharded_dp import zero3

model = llama(dataclasses.replace(DEBUG, batch=8))
spec = model.spec(AdamW(step=2), clip_grad_norm=Fraction(1, 2))
plan = zero3(model, dp=4, clip=True)
