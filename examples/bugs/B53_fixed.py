"""B53 fixed: Megatron-LM PR #5956, Megatron-FSDP v2 + EP: expert gradients divided by the full
data-parallel world (``grad_divisor = ep`` on top of the expert-data-parallel average).

Spec: as B53_buggy.py (a one-layer MoE, 2 routed experts, top-1 softmax routing).
Plan: the library's expert parallelism on Mesh(dp=2, ep=2) with Megatron's scales: every
gradient, expert or dense, is divided by the W = dp x ep ranks whose tokens contributed
(``expert_grad_scale = 1/(dp ep)``: the expert-data-parallel average times the PR's
``grad_divisor`` ep), then all-reduced over its own group (experts: dp; dense: dp and ep).
Expected: EQUIVALENT, with a certificate.
Smallest configuration (CASES2.md B53): ep = 2, one MoE layer (dp = 2).
"""

from fractions import Fraction

from spec_lang import SGD
from spec_lang.models.moe import MoEConfig, moe
from spec_lang.plans.expert_parallel import GRAD_SCALE, expert_parallel, with_settings

CONFIG = MoEConfig(name="b53", hidden=4, n_layers=1, n_heads=1, n_kv_heads=1, moe_ffn_hidden=2,
                   n_routed_experts=2, n_shared_experts=0, top_k=1, gating="softmax",
                   norm_topk_prob=False, balance_bias=False, aux_loss_alpha=0,
                   attention=False, vocab=8, batch=4, seq=2)
model = moe(CONFIG)
spec = model.spec(SGD(lr=Fraction(1, 10)))
plan = expert_parallel(model, dp=2, ep=2, settings=with_settings(expert_grad_scale=GRAD_SCALE))
