"""Mutant of ``llama_pp_dp.py`` (issue 11, pipelining): ``ScheduleGPipe(..., scale_grads=False)``
with a loss that is a per-micro-batch mean, so every gradient is the sum over the micro-batches
of their means: |micro-batches| (2) times the single-device gradient.

``prove --torch`` must not prove it: NOT EQUIVALENT, factor 2 = |mb|; the gloo oracle
(``tests/torch_frontend/pp_truth.py``) agrees.
"""

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

from llama_pp_dp import (  # noqa: F401 -- the contract's names
    MESH, N_MICROBATCHES, SIZES, build_model, build_optimizer, loss_fn, make_batch, parallelize,
)


def train_step(model, optimizer, batch, mesh):
    if mesh is None:
        loss = loss_fn(model(batch["tokens"]), batch["labels"])
        loss.backward()
    else:
        pp = mesh["pp"]
        stage = PipelineStage(model, pp.get_local_rank(), pp.size(), torch.device("cpu"),
                              group=pp.get_group())
        # BUG: the loss is a mean per micro-batch, but the schedule does not divide by their count
        schedule = ScheduleGPipe(stage, n_microbatches=N_MICROBATCHES, loss_fn=loss_fn,
                                 scale_grads=False)
        losses = []
        args = (batch["tokens"],) if stage.is_first else ()
        schedule.step(*args, target=batch["labels"], losses=losses)
        loss = torch.stack(losses).mean() if stage.is_last else None
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
