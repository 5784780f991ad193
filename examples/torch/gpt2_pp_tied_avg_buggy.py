"""GPT-2 (nanoGPT-shaped, head tied to the token embedding) split into 2 pipeline stages x
hand-written data parallelism on dp 2, as ``gpt2_pp_tied.py``.

The bug: the tied weight's two copies are all-reduced over the pipeline group with
``ReduceOp.AVG`` where the single-device gradient is their *sum* (each stage holds one use of
the weight: the embedding on the first, the head on the last). Both copies then take half the
single-device step; ``prove --torch`` reports plan = 0.5 x spec at the tied weight's gradient.

    prove --torch examples/torch/gpt2_pp_tied_avg_buggy.py
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

from gpt2_model import GPT, GPTConfig
from gpt2_pipeline import pipeline_gpt2, tied_weight

MESH = {"pp": 2, "dp": 2}
SIZES = {"batch": 4, "seq": 16, "n_head": 2, "head_dim": 8, "vocab": 64}
N_MICROBATCHES = 2


def build_model(s):
    return GPT(GPTConfig(block_size=s["seq"], vocab_size=s["vocab"], n_layer=2,
                         n_head=s["n_head"], n_embd=s["n_head"] * s["head_dim"]))


def make_batch(s):
    return {"idx": torch.zeros(s["batch"], s["seq"], dtype=torch.long),
            "targets": torch.zeros(s["batch"], s["seq"], dtype=torch.long)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.5)


def parallelize(model, mesh):
    return pipeline_gpt2(model, mesh)


def loss_fn(logits, targets):
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def train_step(model, optimizer, batch, mesh):
    if mesh is None:
        loss = model(batch["idx"], batch["targets"])
        loss.backward()
    else:
        pp = mesh["pp"]
        stage = PipelineStage(model, pp.get_local_rank(), pp.size(), torch.device("cpu"),
                              group=pp.get_group())
        schedule = ScheduleGPipe(stage, n_microbatches=N_MICROBATCHES, loss_fn=loss_fn)
        losses = []
        args = (batch["idx"],) if stage.is_first else ()
        schedule.step(*args, target=batch["targets"], losses=losses)
        loss = torch.stack(losses).mean() if stage.is_last else None
        # BUG: the mean over pp of the two copies' gradients, where their sum is needed
        dist.all_reduce(tied_weight(model).grad, op=dist.ReduceOp.AVG, group=pp.get_group())
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
