"""Qwen2-7B (28 layers, 3584 wide, 28 / 4 heads, FFN 18944, vocab 152064, q/k/v biases) under
Megatron-LM TP4 x DP2 x 2 micro-batches, at the real widths."""

from spec_lang import AdamW
from spec_lang.models import QWEN2_7B, qwen2
from spec_lang.plans import megatron

model = qwen2(QWEN2_7B)
spec = model.spec(AdamW())
plan = megatron(model, tp=4, dp=2, microbatches=2)
