"""Round 26 (non-pipelined; R26-3's family on the data-parallel path): the gradient average
with `dist.all_reduce(..., async_op=True)` and the gradient read *before* `work.wait()` (a
race: for real the tensor is reduced whenever the collective runs; rank 1 joins 1 s late, so
rank 0 deterministically reads its own unreduced gradient). The c10d rule writes the reduced
value where the collective is issued, so the read sees the reduced gradient."""

import time

import torch
import torch.distributed as dist
from torch import nn

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
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        if dist.get_rank() == 1:
            time.sleep(1.0)               # (rank 1 is late: deterministic for real)
        for p in model.parameters():
            work = dist.all_reduce(p.grad, group=mesh["dp"].get_group(), async_op=True)
            avg = p.grad / mesh["dp"].size()      # read before the collective is waited on
            work.wait()
            p.grad.copy_(avg)
    optimizer.step()
    optimizer.zero_grad()
    return loss
