"""Mixtral 8x7B (32 layers, 4096 wide, 32 / 8 heads, 8 experts of 14336, top-2, vocab 32000)
under Megatron-LM TP8 (ETP = TP) x DP2 x 2 micro-batches, at the real widths."""

from spec_lang import AdamW
from spec_lang.models import MIXTRAL_8X7B, mixtral
from spec_lang.plans import megatron

model = mixtral(MIXTRAL_8X7B)
spec = model.spec(AdamW())
plan = megatron(model, tp=8, dp=2, microbatches=2)
