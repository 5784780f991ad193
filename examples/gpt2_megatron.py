"""GPT-2 124M (12 layers, 768 wide, 12 heads, vocab padded to 50304) under Megatron-LM TP4 x
DP2 x 2 micro-batches, at the real widths (``docs/models.md``). The proof's cost does not grow
with the widths or the layer count: the 12 identical layers are one lemma class."""

from spec_lang import AdamW
from spec_lang.models import GPT2_SMALL, gpt2
from spec_lang.plans import megatron

model = gpt2(GPT2_SMALL)
spec = model.spec(AdamW())
plan = megatron(model, tp=4, dp=2, microbatches=2)
