"""Llama-3-70B (80 layers, hidden 8192, 64 / 8 heads, FFN 28672, vocab 128256) under Megatron-LM
3-D parallelism: TP 8 with sequence parallelism x PP 4 x DP 16, 32 micro-batches, 1F1B.

Configuration source: ``docs/ANCHORS.md`` (model row "Llama-3-70B"; mesh = TrainVerify's
Llama3-70B artifact configuration, dp 16 / tp 8 / pp 4 / 32 micro-batches, SOSP'25,
arXiv 2506.15961, Table of published artifact timings), at the real width (TrainVerify shrinks
nothing in this row but runs 80 layers at hidden 4096). Sequence parallelism is on because
Megatron-LM runs TP with ``--sequence-parallel`` for Llama 3 (Korthikanti et al. 2022; the Llama 3
paper, arXiv 2407.21783 sec. 3.3.2, pairs TP with SP); ``build(sp=False)`` is the plain TP plan
TrainVerify verifies.

Plan (``spec_lang/plans/torchtitan.py: megatron_3d``): 20 layers per stage; stage 0 also holds
the vocab-parallel embedding, stage 3 the final norm, the column-parallel head and the
vocab-parallel cross-entropy; activations (B, S[tp], H) sent point-to-point; inside each stage
Megatron TP (one KV head and its 8 query heads per tp rank, F split) with SP regions
(all-gather S before column-parallel layers, reduce-scatter S after row-parallel ones);
parameters replicated over dp (DDP): after the 1F1B accumulation every gradient is scaled
``1/dp`` and all-reduced over dp, the norm weights' Partial[tp] gradients (SP) all-reduced over
tp first. The micro-batch loss is ``(1/K) dp K S_mb / N`` with ``N`` the global token count.
Optimizer: AdamW. Global batch ``dp x K x micro_batch_size`` sequences of 8192 tokens.

Expected: EQUIVALENT. ``build(..., n_layers=4)`` is the reduced-depth CI instance (one layer per
stage, real widths and mesh sizes).
"""

from dataclasses import replace

from spec_lang import AdamW
from spec_lang.models import LLAMA3_70B, llama
from spec_lang.plans.torchtitan import megatron_3d


def build(*, dp=16, tp=8, pp=4, microbatches=32, n_layers=None, micro_batch_size=1, sp=True,
          settings=None):
    """(spec, plan) at real widths; ``n_layers`` (a multiple of ``pp``) gives a shallower
    variant, ``None`` the 80 layers; ``settings`` (``TorchtitanSettings``) for mutants."""
    config = replace(LLAMA3_70B, n_layers=n_layers or LLAMA3_70B.n_layers,
                     batch=dp * microbatches * micro_batch_size)
    model = llama(config)
    plan = megatron_3d(model, tp=tp, dp=dp, pp=pp, microbatches=microbatches, sp=sp,
                      settings=settings)
    return model.spec(AdamW()), plan


spec, plan = build()
