"""DeepSeek-V3-671B under its own training parallelism: PP16 x EP64 x ZeRO-1 DP2, no TP.

Model: spec_lang.models.deepseek.DEEPSEEK_V3 (hidden 7168, 61 layers of which the first 3 are
dense (FFN 18432), 128 heads with MLA (q LoRA 1536, kv LoRA 512, qk nope 128 / rope 64, v 128),
256 routed experts (FFN 2048) + 1 shared, top-8 with sigmoid gating and the selection-only
balancing bias, routed scaling 2.5, the sequence-wise balance loss (alpha 1e-4), one MTP module
(lambda 0.3) sharing the embedding and the output head; vocab 129280, sequences of 4096).

Plan (DeepSeek-V3 tech report, arXiv 2412.19437, sec. 3.2: "16-way Pipeline Parallelism, 64-way
Expert Parallelism spanning 8 nodes, and ZeRO-1 Data Parallelism", no TP, 2048 GPUs):
spec_lang/plans/deepseek.py, docs/parallelism/deepseek-v3.md. ``Mesh(pp=16, dp=2, ep=64)``:
2048 / 16 stages = 128 ranks per stage = ep 64 x dp 2. Every rank of a stage holds its own
sequences (tokens B[dp, mb, ep]); the routed experts are Shard(E) over ep (4 per rank per
layer); token dispatch / combine by all-to-all over ep; the dense parameters are data-parallel
over the 128 ranks of the stage (ZeRO-1: gradient reduce-scattered over dp x ep, AdamW on the
owned 1/128 block, all-gathered back), the experts over dp (ZeRO-1 over the 2 replicas).

Choices the report does not publish (documented, plan data):

* layer split: 4 layers on each of stages 0..14 (stage 0: the embedding, the 3 dense layers and
  the first MoE layer), stage 15: layer 60, the final norm, the head, the loss and the MTP
  module (``deepseek_layer_split``); the embedding is tied between stage 0 and MTP on stage 15
  (its gradient all-reduced over pp; under DualPipe both sit on one device);
* micro-batches: K = 30 of 4 sequences per rank, so 128 x 30 x 4 = 15360 sequences, the
  report's batch after the ramp-up (sec. 4.2);
* schedule: 1F1B (DualPipe is not expressible in the schedule language; it sums the same
  micro-batch gradients, see the plan module's docstring).

Optimizer (sec. 4.2): AdamW, beta1 0.9, beta2 0.95, weight decay 0.1, peak learning rate
2.2e-4. DeepSeek-V3 also clips gradients at norm 1.0: ``build(clip=True)`` adds it to spec and
plan (the plan's global norm: each stage's owned ZeRO-1 blocks squared and summed over their
shard axes, the tied embedding counted once, all-reduced over pp); it is proved at reduced
depth (tests/plans/test_frontier_deepseek.py, slow), but the obligation cutting does not cut
clipped goals yet, so the module-level full-size instance is built without it.

``build(pp=..., ep=..., dp=..., microbatches=..., n_layers=...)`` gives reduced variants (CI:
``n_layers`` small; fewer than 4 layers keep one MoE layer: ``n_dense_layers = min(3,
n_layers - 1)``). Expected: EQUIVALENT.
"""

from dataclasses import replace
from fractions import Fraction

from spec_lang import AdamW
from spec_lang.models.deepseek import DEEPSEEK_V3, deepseek
from spec_lang.plans.deepseek import deepseek_v3_parallel


def build(*, pp=16, ep=64, dp=2, microbatches=30, n_layers=None, micro_batch_size=4, clip=False):
    """(spec, plan) at real widths; ``n_layers`` < 61 gives a shallower variant; ``clip=True``
    adds DeepSeek-V3's gradient clipping at norm 1.0 to both."""
    n = DEEPSEEK_V3.n_layers if n_layers is None else n_layers
    config = replace(DEEPSEEK_V3, n_layers=n, n_dense_layers=min(DEEPSEEK_V3.n_dense_layers, n - 1),
                     batch=dp * ep * microbatches * micro_batch_size)
    model = deepseek(config)
    plan = deepseek_v3_parallel(model, pp=pp, ep=ep, dp=dp, microbatches=microbatches, clip=clip)
    adamw = AdamW(lr=Fraction(22, 100000), betas=(Fraction(9, 10), Fraction(95, 100)),
                  eps=Fraction(1, 10**8), weight_decay=Fraction(1, 10))
    return model.spec(adamw, **({"clip_grad_norm": 1} if clip else {})), plan


spec, plan = build()
