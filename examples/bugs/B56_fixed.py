"""B56 fixed: PyTorch PR #167178, FSDP2 applies ``gradient_divide_factor`` even when the shard
group has one rank.

Spec: as B56_buggy.py (a one-layer MoE, 2 routed experts, top-1 softmax routing).
Plan: expert parallelism with ep = world = 2 (Mesh(dp=1, ep=2)); the experts' 1-rank FSDP group
still divides by the custom factor W (``expert_grad_scale = 1/(dp ep)``).
Expected: EQUIVALENT, with a certificate.
Smallest configuration (CASES2.md B56): 2 ranks, ep = 2, one MoE layer.
"""

from fractions import Fraction

from spec_lang import SGD
from spec_lang.models.moe import MoEConfig, moe
from spec_lang.plans.expert_parallel import GRAD_SCALE, expert_parallel, with_settings

CONFIG = MoEConfig(name="b56", hidden=4, n_layers=1, n_heads=1, n_kv_heads=1, moe_ffn_hidden=2,
                   n_routed_experts=2, n_shared_experts=0, top_k=1, gating="softmax",
                   norm_topk_prob=False, balance_bias=False, aux_loss_alpha=0,
                   attention=False, vocab=8, batch=2, seq=2)
model = moe(CONFIG)
spec = model.spec(SGD(lr=Fraction(1, 10)))
plan = expert_parallel(model, dp=1, ep=2, settings=with_settings(expert_grad_scale=GRAD_SCALE))
