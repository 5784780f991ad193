"""Round 6 attempt: the FSDP2 MLP of ``t4_19_fsdp_control.py`` (correct) with ``fully_shard`` bound
through ``functools.partial`` at import time, so the object ``parallelize`` calls is torch's own
function, not the recording stand-in of ``dataparallel.record_data_parallel``. Correct program:
EQUIVALENT or a refusal are right, NOT EQUIVALENT is not."""

import torch
from torch import nn
import functools

from torch.distributed.fsdp import fully_shard

shard = functools.partial(fully_shard, reshard_after_forward=True)

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    dp = mesh["dp"]
    shard(model.w1, mesh=dp)
    shard(model.w2, mesh=dp)
    shard(model, mesh=dp)
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
