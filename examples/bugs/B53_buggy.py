"""B53 buggy: Megatron-LM PR #5956, Megatron-FSDP v2 + EP: expert gradients not divided by the
EP size.

Spec: a one-layer MoE (``spec_lang.models.moe``, router-only stack: embedding, one MoE layer with
2 routed experts, top-1 softmax routing, head; masked token-mean cross-entropy); SGD.
Plan: the library's expert parallelism (``expert_parallel``) on Mesh(dp=2, ep=2): tokens over
dp x ep (W = 4 ranks), routed experts ``Shard(E)`` over ep, token dispatch / combine by
all-to-all. Each rank's seed is ``W * S_r / N`` (the average over the W ranks undoes it). After
the all-to-all an expert's gradient already sums the contributions of all ep ranks' tokens;
Megatron-FSDP v2 reduce-scatters it with AVG over the expert-data-parallel mesh (size W/ep = dp),
so it divides by dp while W ranks contributed (``expert_grad_scale = 1/dp``).
Expected: NOT EQUIVALENT: every expert gradient is ep x the spec: 2.000 on
``grad:layers.0.moe.experts.*``; dense gradients are right.
Smallest configuration (CASES2.md B53): ep = 2, one MoE layer: expert grads x 2 (here with
dp = 2 so that the expert-data-parallel average is not the identity).
"""

from fractions import Fraction

from spec_lang import SGD, Axis
from spec_lang.models.moe import MoEConfig, moe
from spec_lang.plans.expert_parallel import expert_parallel, with_settings
from spec_lang.plans.megatron import Scale

DP = Axis.DP
CONFIG = MoEConfig(name="b53", hidden=4, n_layers=1, n_heads=1, n_kv_heads=1, moe_ffn_hidden=2,
                   n_routed_experts=2, n_shared_experts=0, top_k=1, gating="softmax",
                   norm_topk_prob=False, balance_bias=False, aux_loss_alpha=0,
                   attention=False, vocab=8, batch=4, seq=2)
model = moe(CONFIG)
spec = model.spec(SGD(lr=Fraction(1, 10)))
EXPERT_DP_AVG = Scale("1/dp", ((DP, -1),),
                      "Megatron-FSDP v2: AVG over the expert-data-parallel mesh (W/ep ranks)")
plan = expert_parallel(model, dp=2, ep=2,
                       settings=with_settings(expert_grad_scale=EXPERT_DP_AVG))   # BUG: no 1/ep
