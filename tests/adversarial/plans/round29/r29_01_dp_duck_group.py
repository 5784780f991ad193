"""Round 29 (dp only): mlp_ddp.py with the gradient sums issued by dist.all_reduce (synchronous)
but with a duck-typed `group=` object whose `allreduce` forwards to the real ProcessGroup and
returns None (dist.all_reduce then takes it that "the backend has synced at C++ level" and
waits nothing). The c10d.allreduce_ node is recorded inside the patched dist.all_reduce, so it is
marked; its async_op is False. Rank 1 is a 1 s straggler: rank 0 divides and steps with its own
gradient. Wrong."""


import time

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
LATE = 1.0
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Forward:
    """Looks enough like a ProcessGroup for dist.all_reduce; keeps the work to itself."""

    def __init__(self, pg):
        self.pg = pg
        self.works = []

    def allreduce(self, tensors, opts):
        self.works.append(self.pg.allreduce(tensors, opts))
        return None


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
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        if dist.get_rank() == 1:
            time.sleep(LATE)            # a straggler
        pg = mesh["dp"].get_group()
        for p in model.parameters():
            dist.all_reduce(p.grad, group=Forward(pg))   # the work is never waited
        for p in model.parameters():
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
