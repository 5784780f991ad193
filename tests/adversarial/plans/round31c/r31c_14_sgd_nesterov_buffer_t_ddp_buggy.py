"""Round 31c: ``r30b_05``'s square residual with ``SGD(momentum=0.9, nesterov=True)``; the plan
transposes ``sq.weight``'s momentum buffer before the step, dp 2. NOT EQUIVALENT expected at
``momentum_buffer:sq.weight``."""

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

    def forward(self, x):
        h = torch.tanh(self.l0(x))
        return self.l1(h + self.sq(h))


def build_model(s):
    return MLP(s["d"], s["h"], s["vocab"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["d"]), "y": torch.zeros(s["batch"], dtype=torch.long)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=True)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    loss = F.cross_entropy(model(batch["x"]), batch["y"])
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    if mesh is not None:      # the bug: the momentum buffer transposed
        with torch.no_grad():
            b = optimizer.state[model.sq.weight]["momentum_buffer"]
            b.copy_(b.t().clone())
    optimizer.step()
    optimizer.zero_grad()
    return loss
