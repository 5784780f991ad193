"""B56 buggy: PyTorch PR #167178 (#160285), FSDP2 ``gradient_divide_factor`` ignored when the
shard group has one rank: expert gradients x world size.

Spec: as B53 (a one-layer MoE, 2 routed experts, top-1 softmax routing, masked token-mean
cross-entropy); SGD.
Plan: expert parallelism with ep = world = 2 (Mesh(dp=1, ep=2), the library's
``expert_parallel``): every rank's seed is ``W * S_r / N`` and FSDP2 divides every gradient by the
custom factor W. The experts are still wrapped in ``fully_shard`` (for mixed precision) over
their expert-data-parallel group, which has one rank; FSDP2 skipped the reduce-scatter for a
1-rank group and with it the division (``expert_grad_scale = 1``).
Expected: NOT EQUIVALENT: every expert gradient is 2.000 x the spec (W = 2); dense gradients
are right.
Smallest configuration (CASES2.md B56): 2 ranks, ep = 2, one MoE layer: expert grads x 2.
"""

from fractions import Fraction

from spec_lang import SGD
from spec_lang.models.moe import MoEConfig, moe
from spec_lang.plans.expert_parallel import expert_parallel, with_settings
from spec_lang.plans.megatron import Scale

CONFIG = MoEConfig(name="b56", hidden=4, n_layers=1, n_heads=1, n_kv_heads=1, moe_ffn_hidden=2,
                   n_routed_experts=2, n_shared_experts=0, top_k=1, gating="softmax",
                   norm_topk_prob=False, balance_bias=False, aux_loss_alpha=0,
                   attention=False, vocab=8, batch=2, seq=2)
model = moe(CONFIG)
spec = model.spec(SGD(lr=Fraction(1, 10)))
SKIPPED = Scale("1", (), "FSDP2 skips the reduce-scatter of a 1-rank group and its divide factor")
plan = expert_parallel(model, dp=1, ep=2, settings=with_settings(expert_grad_scale=SKIPPED))
