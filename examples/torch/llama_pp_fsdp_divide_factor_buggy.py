"""Mutant of ``llama_pp_fsdp.py`` (PP x FSDP2): ``set_gradient_divide_factor(1.0)`` on the stage
module, so FSDP2's reduction of the stage's own parameters (the embedding on stage 0, the final
norm and the head on stage 1; the blocks are units of their own) is a sum over dp where the
loss is a per-rank mean: |dp| (2) times the single-device gradient there.

``prove --torch`` must not prove it: NOT EQUIVALENT at ``grad:output.weight``, plan = 2 x spec
(2 = |dp|), stage 1, naming the ``set_gradient_divide_factor`` line (201 s); the gloo oracle
(``tests/torch_frontend/pp_truth.py``) agrees (grad 0.066 at ``output.weight``, the 18 block
parameters exact).
"""

import torch
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

from llama_pipeline import pipeline_llama
from llama_pp_fsdp import (  # noqa: F401 -- the contract's names
    MESH, N_MICROBATCHES, SIZES, build_model, build_optimizer, loss_fn, make_batch,
)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    stage = pipeline_llama(model, mesh)
    for block in stage.layers.values():
        fully_shard(block, mesh=mesh["dp"])
    fully_shard(stage, mesh=mesh["dp"])
    stage.set_gradient_divide_factor(1.0)
    return stage


def train_step(model, optimizer, batch, mesh):
    if mesh is None:
        loss = loss_fn(model(batch["tokens"]), batch["labels"])
        loss.backward()
    else:
        pp = mesh["pp"]
        stage = PipelineStage(model, pp.get_local_rank(), pp.size(), torch.device("cpu"),
                              group=pp.get_group())
        schedule = ScheduleGPipe(stage, n_microbatches=N_MICROBATCHES, loss_fn=loss_fn)
        losses = []
        args = (batch["tokens"],) if stage.is_first else ()
        schedule.step(*args, target=batch["labels"], losses=losses)
        loss = torch.stack(losses).mean() if stage.is_last else None
    optimizer.step()
    optimizer.zero_grad()
    return loss
