"""Mutant of ``llama_pp_dp.py`` (issue 11, pipelining): the last stage detaches the activation it
receives, so it computes no gradient for it and torch's schedule sends *zeros* upstream (its
``get_bwd_send_ops`` sends a zero buffer for a ``None`` gradient): stage 0's gradients are
those of a zero upstream gradient.

``prove --torch`` must not prove it: the send of a constant is refused (exit 3, naming the
line); the gloo oracle (``tests/torch_frontend/pp_truth.py``) shows stage 0's gradients wrong.
"""

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

from llama_pipeline import LlamaStage
from llama_pp_dp import (  # noqa: F401 -- the contract's names
    MESH, N_MICROBATCHES, SIZES, build_model, build_optimizer, loss_fn, make_batch,
)


class DetachingStage(LlamaStage):
    def forward(self, h):
        if self.tok_embeddings is None:
            h = h.detach()      # BUG: no gradient flows back to the previous stage
        return super().forward(h)


def parallelize(model, mesh):
    return DetachingStage(model, mesh["pp"].get_local_rank(), mesh["pp"].size())


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
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
