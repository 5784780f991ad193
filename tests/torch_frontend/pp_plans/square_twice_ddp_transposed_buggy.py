"""The wrong mirror of ``square_twice_ddp.py``: the parallel model applies the square layer's
second use with its weight transposed (``x @ W`` where single-device computes ``x @ W^T``).
Both weight dims are the same logical dim, so only their positions tell the two apart: NOT
EQUIVALENT (before twin dims a square weight combined with its own output was refused)."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "d": 8, "h": 16, "vocab": 12}


class MLP(nn.Module):
    def __init__(self, d, h, v):
        super().__init__()
        self.l0 = nn.Linear(d, h)
        self.sq = nn.Linear(h, h)
        self.l1 = nn.Linear(h, v)
        self.transposed = False

    def forward(self, x):
        h = torch.tanh(self.l0(x))
        h = torch.tanh(self.sq(h))
        if self.transposed:          # wrong: W where single-device applies W^T
            return self.l1(torch.tanh(h @ self.sq.weight + self.sq.bias))
        return self.l1(torch.tanh(self.sq(h)))


def build_model(s):
    return MLP(s["d"], s["h"], s["vocab"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["d"]), "y": torch.zeros(s["batch"], dtype=torch.long)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.5)


def parallelize(model, mesh):
    model.transposed = True
    return model


def train_step(model, optimizer, batch, mesh):
    loss = F.cross_entropy(model(batch["x"]), batch["y"])
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
