"""Round 30b: the R30b-1 construct on ``nn.Linear(h, h)``'s own weight (gradient flowing
through ``m.sum(0)``): NOT EQUIVALENT, refuted on ``grad:sq.weight`` only (the forward goals
agree in the two IRs; the gradient through the expand differs)."""

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
        self.wrong = False

    def forward(self, x):
        h = torch.tanh(self.l0(x))
        w = self.sq.weight
        n = w.shape[0]
        s = w.sum(0).expand(n, n)
        w_eff = (s if self.wrong else s.t()) + w
        h = torch.tanh(F.linear(h, w_eff, self.sq.bias))
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
