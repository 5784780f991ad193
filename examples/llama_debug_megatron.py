"""Debug Llama (2 layers, 4 query / 2 KV heads) under Megatron-LM TP2 x DP2, 2 micro-batches.

The fast example the tests prove: KV heads split over tp (kv_heads % tp == 0).
"""

from spec_lang import AdamW
from spec_lang.models import DEBUG, llama
from spec_lang.plans import megatron

model = llama(DEBUG)
spec = model.spec(AdamW())
plan = megatron(model, tp=2, dp=2, microbatches=2)
