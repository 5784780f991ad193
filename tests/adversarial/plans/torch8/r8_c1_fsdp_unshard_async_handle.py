"""Round 8 control (correct): the FSDP2 MLP whose `train_step` prefetches the root's
parameters before the forward with `handle = model.unshard(async_op=True)` and waits on the
handle (FSDP2's documented explicit-prefetch pattern; `unshard` returns an `UnshardHandle` when
`async_op=True`): the same numbers. Should prove EQUIVALENT; `dataparallel.NEUTRAL_FSDP_METHODS`
makes `unshard` a no-op returning None, so `handle.wait()` raises AttributeError."""

import torch
from torch import nn
from torch.distributed.fsdp import fully_shard

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
    fully_shard(model.w1, mesh=dp)
    fully_shard(model.w2, mesh=dp)
    fully_shard(model, mesh=dp)
    return model


def train_step(model, optimizer, batch, mesh):
    if mesh is not None:
        handle = model.unshard(async_op=True)
        handle.wait()
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
