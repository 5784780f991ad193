"""Round 31c: a mirror of ``r31c_09``: the plan transposes the sharded square weight's
gradient before Adam, tp 2. NOT EQUIVALENT expected at ``grad:sq.weight``."""

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import Replicate
from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module

MESH = {"tp": 2}
SIZES = {"batch": 8, "d": 8, "h": 16, "vocab": 12}


class MLP(nn.Module):
    def __init__(self, d, h, v):
        super().__init__()
        self.l0 = nn.Linear(d, h)
        self.sq = nn.Linear(h, h)
        self.l1 = nn.Linear(h, v)

    def forward(self, x):
        h = torch.tanh(self.l0(x))
        h = h + self.sq(h)
        return self.l1(torch.tanh(h))


def build_model(s):
    return MLP(s["d"], s["h"], s["vocab"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["d"]), "y": torch.zeros(s["batch"], dtype=torch.long)}


def build_optimizer(model):
    return torch.optim.Adam(model.parameters(), lr=0.01)


def parallelize(model, mesh):
    parallelize_module(model, mesh["tp"], {"sq": ColwiseParallel(output_layouts=Replicate())})
    return model


def train_step(model, optimizer, batch, mesh):
    loss = F.cross_entropy(model(batch["x"]), batch["y"])
    loss.backward()
    if mesh is not None:          # the bug
        with torch.no_grad():
            g = model.sq.weight.grad
            g.copy_(g.t())
    optimizer.step()
    optimizer.zero_grad()
    return loss
