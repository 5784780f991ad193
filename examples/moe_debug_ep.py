"""Expert parallelism on the debug MoE model: EP2 x DP2, AdamW.

Model: spec_lang.models.moe.MOE_DEBUG (1 layer, hidden 8, 2 / 1 heads, 4 routed experts + 1
shared, top-2, DeepSeek-V3 sigmoid gating with the selection-only balancing bias, normalised
top-k weights, routed scaling 2.5, load-balancing aux loss alpha = 0.01).

Plan (spec_lang/plans/expert_parallel.py, docs/parallelism/expert-parallel.md): tokens Shard(B)
over dp x ep; routed experts Shard(E) over ep; token dispatch and combine by all-to-all over ep
(declared backward: the reverse all-to-all) around the dispatcher's token permutation; the
seed is dp*ep*(S_r/N + alpha*A_r); dense gradients averaged over dp x ep, expert gradients over
dp (expert data parallelism). Expected: EQUIVALENT.
"""

from spec_lang import AdamW
from spec_lang.models.moe import MOE_DEBUG, moe
from spec_lang.plans.expert_parallel import expert_parallel

model = moe(MOE_DEBUG)
spec = model.spec(AdamW())
plan = expert_parallel(model, dp=2, ep=2)
