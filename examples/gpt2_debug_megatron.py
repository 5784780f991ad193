"""Debug GPT-2 (2 layers; LayerNorm with bias, tanh-GELU, learned positions, tied head) under
Megatron-LM TP2 x DP2 x 2 micro-batches, from the library's plan builder (``docs/models.md``).

The builder reads the model's protocol (``tp_layer_plan``: heads and ``F`` split, biases with
their columns, row-parallel biases replicated after the all-reduce; ``tp_outer_plan``: the
vocab-parallel ``wte`` serving embedding and tied head). The same plan written by hand is
``gpt2_debug_megatron_by_hand.py``.
"""

from spec_lang import AdamW
from spec_lang.models import GPT2_DEBUG, gpt2
from spec_lang.plans import megatron

model = gpt2(GPT2_DEBUG)
spec = model.spec(AdamW())
plan = megatron(model, tp=2, dp=2, microbatches=2)
