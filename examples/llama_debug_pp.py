"""Debug Llama (2 layers) under pipeline x tensor x data parallelism: PP2 x TP2 x DP2, 1F1B,
4 micro-batches (``docs/parallelism/pipeline.md``).

Stage 0 holds the vocab-parallel embedding and layer 0; stage 1 holds layer 1, the final norm
and the column-parallel head with the vocab-parallel cross-entropy. The activation moves by an
explicit send / recv. Inside each stage the blocks are Megatron-LM's TP hooks
(``spec_lang.plans.megatron.MegatronTP``). The schedule is 1F1B (stage 0: F0 F1 B0 F2 B1 F3 B2
B3; stage 1: F0 B0 F1 B1 ...), every forward under DDP's ``no_sync`` and one data-parallel
reduction (avg) after each stage's last backward; each micro-batch backprops
``dp * S_mb / N`` with ``N`` the token count over all micro-batches and dp ranks.

The debug Llama has separate input embedding and output head weights (no tied embedding), so
this example has no tied parameter; ``tests/spec_lang/test_pipeline.py`` proves a tied
embedding across the two stages on a small model.
"""

import dataclasses

from spec_lang import AdamW, Axis, Loss, Mesh, Plan, microbatches, ops
from spec_lang.models import DEBUG, llama
from spec_lang.models.llama import transformer_block
from spec_lang.pipeline import Pipeline, stage
from spec_lang.plans.megatron import MegatronSettings, MegatronTP, megatron_placements
from spec_lang.schedules import one_f_one_b, reduce_after_last_backward

DP, TP, PP, MB = Axis.DP, Axis.TP, Axis.PP, Axis.MB
M = 4
model = llama(dataclasses.replace(DEBUG, batch=8))     # 8 sequences: dp=2 x 4 micro-batches
c, d = model.config, model.dims
spec = model.spec(AdamW())
settings = MegatronSettings()


def stage0(p, data, io):
    ctx = MegatronTP(settings)
    x = ctx.embed(data["tokens"], p["tok_embeddings"], d)
    io.send(transformer_block(p.scope("layers.0"), x, c, d, ctx))


def stage1(p, data, io):
    ctx = MegatronTP(settings)
    x = transformer_block(p.scope("layers.1"), io.recv(), c, d, ctx)
    x = ctx.head_input(ops.rms_norm(x, p["norm"], d.H, c.norm_eps), d)
    logits = ops.einsum(x, p["output"], out=(d.B, d.S, d.V))
    seed = ctx.loss(logits, data["labels"], data["mask"], d)    # dp*K/N * S_mb / K
    return Loss(backward=seed, report=ctx.report)


schedule = reduce_after_last_backward(one_f_one_b(pp=2, microbatches=M), DP, "avg")
pipe = Pipeline([stage(stage0, ["tok_embeddings", "layers.0."]),
                 stage(stage1, ["layers.1.", "norm", "output"])], schedule=schedule)
plan = Plan(mesh=Mesh(pp=2, dp=2, tp=2), placements=megatron_placements(model, tp=2),
            forward=pipe.forward, schedule=pipe, microbatches=microbatches(M, d.B))
