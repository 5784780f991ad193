"""Round 30b, a wrong mirror of ``r30b_11`` (R30b-3, fixed in stop 31): ``sq`` ColwiseParallel
(output gathered) in a residual, and the parallel step applies it with its weight transposed
(``x @ W`` for ``x @ W^T``), tp 2: NOT EQUIVALENT expected."""

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import Replicate
from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module

MESH = {"tp": 2}
SIZES = {"batch": 8, "d": 8, "h": 16, "vocab": 12}


class Square(nn.Linear):
    """``nn.Linear(h, h)`` that uses its weight transposed when ``flip`` is set (the plan)."""

    flip = False

    def forward(self, x):
        return F.linear(x, self.weight.t() if self.flip else self.weight, self.bias)


class MLP(nn.Module):
    def __init__(self, d, h, v):
        super().__init__()
        self.l0 = nn.Linear(d, h)
        self.sq = Square(h, h)
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
    return torch.optim.SGD(model.parameters(), lr=0.5)


def parallelize(model, mesh):
    model.sq.flip = True          # the bug: the parallel step uses sq's weight transposed
    parallelize_module(model, mesh["tp"], {"sq": ColwiseParallel(output_layouts=Replicate())})
    return model


def train_step(model, optimizer, batch, mesh):
    loss = F.cross_entropy(model(batch["x"]), batch["y"])
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
