"""Debug GPT-2 under Megatron-LM's 3-D parallelism TP2 x PP2 x DP2, 1F1B over 2 micro-batches.

The tied embedding and head live on the first and the last stage: each holds ``wte`` and gets the
gradient of its own uses; the builder all-reduces it over ``pp`` (Megatron's embedding group)
before the DP average. Learned positions stay on stage 0.
"""

from spec_lang import AdamW
from spec_lang.models import GPT2_DEBUG, gpt2
from spec_lang.plans.torchtitan import megatron_3d

model = gpt2(GPT2_DEBUG)
spec = model.spec(AdamW())
plan = megatron_3d(model, tp=2, dp=2, pp=2, microbatches=2)
