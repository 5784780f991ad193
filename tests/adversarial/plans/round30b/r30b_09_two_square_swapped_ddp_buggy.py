"""Round 30b: two square ``nn.Linear(h, h)`` in residuals (``a`` then ``b``); the parallel
step applies them in the other order: NOT EQUIVALENT expected (and given)."""

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
        self.a = nn.Linear(h, h)
        self.b = nn.Linear(h, h)
        self.wrong = False
        self.l1 = nn.Linear(h, v)

    def forward(self, x):
        h = torch.tanh(self.l0(x))
        f, g = (self.b, self.a) if self.wrong else (self.a, self.b)
        h = torch.tanh(h + f(h))
        h = torch.tanh(h + g(h))
        return self.l1(h)


def build_model(s):
    return MLP(s["d"], s["h"], s["vocab"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["d"]), "y": torch.zeros(s["batch"], dtype=torch.long)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.5)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    model.wrong = mesh is not None
    loss = F.cross_entropy(model(batch["x"]), batch["y"])
    model.wrong = False
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
