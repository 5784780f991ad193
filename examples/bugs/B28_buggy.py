"""B28 buggy: Megatron-LM issue #2237 / PR #5047, MoE router load-balancing loss with context parallelism.

Spec (dp=1, one micro-batch): L = S/N + alpha * A, the token-mean cross-entropy plus the
load-balancing loss A = E * sum_e f_e P_e (Switch Transformer eq. 4) from the routing statistics
of the whole sequence; the router gradient is grad(S/N) + alpha * grad(A).

Plan: cp=2 ranks each hold half of the sequence (Shard(S) over cp). Rank c computes A_c with the
global routing fractions f_e (all-reduced counts) and its *local* router probabilities over the
global token count, so sum_c A_c = A: a Partial[cp] term. The main loss is pre-multiplied by cp so
that it comes out right after Megatron's gradient average over DP x CP; the aux loss is injected
as alpha * A_c (Megatron's MoEAuxLossAutoScaler, scale 1/M with M=1 micro-batch) and the same
average divides it by cp.

Expected: NOT EQUIVALENT at the router-weight gradient ``grad:layers.0.moe.router``: with the main
loss zeroed (this file, as CASES.md asks) plan / spec = 1/cp = 0.500; with the main loss
(``build(main_loss=True)``) the values differ (main + aux/cp).
Fixed (B28_fixed.py): inject alpha * cp * A_c.
Smallest configuration (CASES.md): dp=1, cp=2, one MoE layer with 2 experts, top-1, alpha > 0.
"""

from fractions import Fraction

from spec_lang import SGD, Axis, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops
from spec_lang.models.moe import MoEConfig, MoEContext, moe, moe_forward

CP = Axis.CP
ALPHA = Fraction(1, 10)
CONFIG = MoEConfig(name="b28", hidden=4, n_layers=1, n_heads=1, n_kv_heads=1, moe_ffn_hidden=4,
                   n_routed_experts=2, n_shared_experts=0, top_k=1, gating="softmax",
                   norm_topk_prob=False, balance_bias=False, aux_loss_alpha=ALPHA,
                   attention=False, vocab=8, batch=1, seq=4)
MODEL = moe(CONFIG)


class ContextParallel(MoEContext):
    """Each cp rank routes its own tokens; routing counts and the token count are global."""

    def routing_count(self, count, d):
        return all_reduce(count, CP)                      # f_e from the whole sequence

    def loss(self, logits, labels, mask, d):
        n = all_reduce(ops.sum(mask), CP)                 # global token count N
        return ops.sum(mask * ops.cross_entropy_per_token(logits, labels, d.V)) / n   # S_c / N


def build(cp=2, alpha=ALPHA, main_loss=False, aux_scale=None):
    """(spec, plan) at ``cp`` ranks; ``aux_scale`` is the factor the plan puts on alpha * A_c."""

    def objective(p, d):
        main, aux = moe_forward(p, d, CONFIG, MODEL.dims, MoEContext())
        return (main if main_loss else 0) + aux * alpha

    def forward(p, d):
        main_c, aux_c = moe_forward(p, d, CONFIG, MODEL.dims, ContextParallel())
        scale = ops.axis_size(CP)                         # undone by the average over DP x CP
        injected = aux_c * alpha * (aux_scale if aux_scale is not None else 1)   # BUG: no cp
        seed = (main_c * scale if main_loss else 0) + injected
        report = all_reduce((main_c if main_loss else 0) + aux_c * alpha, CP)
        return Loss(backward=seed, report=report)

    spec = Spec(params=MODEL.params, data=MODEL.data, forward=objective, optimizer=SGD())
    tokens = {CP: Shard(MODEL.dims.S)}
    plan = Plan(mesh=Mesh(dp=1, cp=cp), forward=forward,
                placements={"tokens": tokens, "labels": tokens, "mask": tokens},
                reduce_grads=lambda name, g: all_reduce(g, CP, "avg"))   # Megatron: avg over DP x CP
    return spec, plan


# CASES.md: the main loss zeroed, so the router gradient is the aux part alone;
# build(main_loss=True) adds the cross-entropy S/N (tests/bugs/test_moe.py checks both).
spec, plan = build()
