"""Debug Qwen2 (2 layers, q/k/v biases, tied embedding and head) under Megatron-LM TP2 x DP2 x 2
micro-batches: the biases are column-parallel with their projections; the vocab-parallel
``tok_embeddings`` serves the embedding and the head (``docs/models.md``)."""

from spec_lang import AdamW
from spec_lang.models import QWEN2_DEBUG, qwen2
from spec_lang.plans import megatron

model = qwen2(QWEN2_DEBUG)
spec = model.spec(AdamW())
plan = megatron(model, tp=2, dp=2, microbatches=2)
