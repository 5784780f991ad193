"""DeepSeek-V3's parallelism (PP x EP x ZeRO-1 DP, no TP) on a 2-layer debug MoE model:
pp2 x dp2 x ep2, 1F1B over 2 micro-batches, AdamW.

Model: spec_lang.models.moe.MOE_DEBUG with 2 layers and batch 8 (hidden 8, 4 routed experts + 1
shared, top-2, DeepSeek-V3 sigmoid gating with the selection-only balancing bias, normalised
top-k weights, routed scaling 2.5, load-balancing aux loss alpha = 0.01).

Plan (spec_lang/plans/deepseek.py, docs/parallelism/deepseek-v3.md): stage 0 holds the embedding
and layer 0, stage 1 layer 1, the final norm, the head and the loss; activations sent
point-to-point; 1F1B over K = 2 micro-batches. Inside a stage the 4 ranks (dp x ep) each hold
their own tokens, B[dp, mb, ep]; routed experts Shard(E) over ep, token dispatch / combine by
all-to-all over ep (declared backward: the reverse all-to-all); each layer's aux term is added
on its stage. The seed is dp*ep*K*(S_r/N + alpha*A_r)/K; ZeRO-1: dense gradients 1/(dp*ep)
then reduce-scattered over dp and ep, expert gradients 1/(dp*ep) then reduce-scattered over dp;
AdamW on the owned blocks; the updated blocks all-gathered back. Expected: EQUIVALENT.
"""

import dataclasses

from spec_lang import AdamW
from spec_lang.models.moe import MOE_DEBUG, moe
from spec_lang.plans.deepseek import deepseek_v3_parallel

model = moe(dataclasses.replace(MOE_DEBUG, batch=8, n_layers=2))
spec = model.spec(AdamW())
plan = deepseek_v3_parallel(model, pp=2, ep=2, dp=2, microbatches=2)
