"""Llama-3.1-405B (126 layers, hidden 16384, 128 / 8 heads, FFN 53248, vocab 128256) as Meta
trained it at 8K context: TP 8 + SP x PP 16 x DP 64 with FSDP-style sharding, 16 micro-batches,
1F1B, 7 / 8 x 14 / 7 layers per stage.

Configuration source: ``docs/ANCHORS.md`` ("Llama-3.1-405B ... trained with TP 8, PP 16, DP 64,
CP 1, 8,192 GPUs, seq 8192") and the Llama 3 paper (Dubey et al., "The Llama 3 Herd of Models",
arXiv 2407.21783), section 3.3.2 and its Table 4 (8,192 GPUs: TP 8, CP 1, PP 16, DP 64, sequence
8,192, 16M tokens per batch = 64 x 32 sequences, so 16 micro-batches of 2 sequences per dp rank).

What the plan models (``spec_lang/plans/torchtitan.py: torchtitan_3d``), and how it maps to the
paper:

* **4-D order [TP, CP, PP, DP]** with CP = 1: ``Mesh(pp=16, dp=64, tp=8)``.
* **TP + SP** (Megatron layout): one KV head and its 16 query heads per tp rank, ``F`` split,
  vocab-parallel embedding / head / cross-entropy; the residual stream is ``Shard(S)`` over tp
  between TP regions; the RMSNorm weights' gradients (Partial over tp) are all-reduced over tp.
* **PP 16, uneven stages**: "we reduce one Transformer layer each from the first and the last
  stages" (sec. 3.3.2, pipeline parallelism improvements): 126 = 7 + 14 x 8 + 7
  (``first_last_lighter_split``); stage 0 also holds the embedding, stage 15 the final norm, the
  head and the loss. Activations (B, S[tp], H) go point-to-point.
* **Schedule**: 1F1B with one model chunk per stage (the module-level plan). The paper's
  *interleaved* schedule is ``build(chunks=v)`` (Megatron's interleaved 1F1B, virtual stage
  ``j`` on stage ``j % 16``; with ``v = 8`` the first chunk holds only the embedding and the last
  only the head and loss, "the first model chunk on the first stage has only the embedding");
  the paper does not give ``v``. NOT modelled: its tunable number of contiguous micro-batches
  per round (Megatron's interleaved order is used).
* **FSDP over dp** ("shards optimizer states and gradients, but for model shards we do not
  reshard after forward computation"): every parameter ``Shard`` over dp along a dim tp does not
  split, all-gathered before use (declared backward: the reduce-scatter of its gradient), the
  gradient averaged ``1/dp``; AdamW runs on the rank's (dp, tp) shard. Not resharding after
  forward only saves the backward's re-all-gather: over the reals the backward uses the same
  gathered value, so the traced program is the same. The paper accumulates gradients in FP32
  over micro-batches and reduce-scatters in FP32: the sums are exact here (the precision lint
  is separate).
* **Loss**: the masked token mean over the global batch; each micro-batch's loss is
  ``(1/K) dp K S_mb / N`` with ``N`` counted over the K micro-batches and dp before the loop.

Expected: EQUIVALENT. ``build(n_layers=30)`` keeps the paper's split at reduced depth
(1 / 2 x 14 / 1); ``build(n_layers=16)`` is one layer per stage.
"""

from dataclasses import replace

from spec_lang import AdamW
from spec_lang.models import LLAMA31_405B, llama
from spec_lang.plans.torchtitan import (
    TorchtitanSettings, first_last_lighter_split, torchtitan_3d,
)


def stage_layers(n_layers, n_stages):
    """The paper's first/last-lighter split over ``n_stages`` (virtual) stages when it divides
    ``n_layers + 2``, else ``None`` (equal stages)."""
    if (n_layers + 2) % n_stages == 0:
        return first_last_lighter_split(n_layers, n_stages)
    return None


def build(*, dp=64, tp=8, pp=16, microbatches=16, n_layers=None, micro_batch_size=2,
          chunks=1, settings=None):
    """(spec, plan) at real widths; ``n_layers=None`` is the 126 layers; ``chunks > 1`` is the
    paper's interleaved 1F1B with that many model chunks per stage (``chunks=8``: 128 virtual
    stages, the first holding only the embedding, the last only the head and loss, one layer
    in each of the others)."""
    config = replace(LLAMA31_405B, n_layers=n_layers or LLAMA31_405B.n_layers,
                     batch=dp * microbatches * micro_batch_size)
    model = llama(config)
    st = replace(settings or TorchtitanSettings(), chunks=chunks,
                 schedule="interleaved_1f1b" if chunks > 1 else "1f1b",
                 stage_layers=stage_layers(config.n_layers, pp * chunks))
    plan = torchtitan_3d(model, dp=dp, tp=tp, pp=pp, microbatches=microbatches, sp=True,
                         settings=st)
    return model.spec(AdamW()), plan


spec, plan = build()
