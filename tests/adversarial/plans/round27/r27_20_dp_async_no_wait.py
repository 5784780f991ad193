"""Round 27 (dp only, the non-pipelined path): mlp_ddp.py with the gradient all-reduces issued
async_op=True and never waited (a straggler: rank 1 comes 1 s late). For real rank 0 divides
and steps with its own partial gradient (g0 / 2) before the sum lands. The all-reduce rule
composes the call as synchronous (async_op=True, the schema default, is not in the traced
node). Wrong (racy; deterministic on rank 0 with the straggler)."""

import time

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
LATE = 1.0
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
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        if dist.get_rank() == 1:
            time.sleep(LATE)            # a straggler
        works = [dist.all_reduce(p.grad, group=mesh["dp"].get_group(), async_op=True)
                 for p in model.parameters()]
        for p in model.parameters():    # BUG: the works are never waited
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
