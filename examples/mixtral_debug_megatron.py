"""Debug Mixtral (2 layers, 4 experts, softmax top-2, no shared expert) under Megatron-LM TP2 x
DP2 x 2 micro-batches: experts tensor-parallel over ``FE`` (ETP = TP), router replicated, the
load-balancing loss with global routing counts (``docs/models.md``)."""

from spec_lang import AdamW
from spec_lang.models import MIXTRAL_DEBUG, mixtral
from spec_lang.plans import megatron

model = mixtral(MIXTRAL_DEBUG)
spec = model.spec(AdamW())
plan = megatron(model, tp=2, dp=2, microbatches=2)
