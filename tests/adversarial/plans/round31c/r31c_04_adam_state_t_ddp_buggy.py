"""Round 31c, a mirror of ``r30b_05`` (Adam on a square layer in a residual, R30b-2's fix):
the parallel step transposes ``sq.weight``'s ``exp_avg`` (an input of the step,
``OPTIMIZER_STEP`` 1) before ``optimizer.step()``, dp 2. NOT EQUIVALENT expected."""

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
    return torch.optim.Adam(model.parameters(), lr=0.01)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    loss = F.cross_entropy(model(batch["x"]), batch["y"])
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    if mesh is not None:      # the bug: sq.weight's first moment transposed before the step
        with torch.no_grad():
            ea = optimizer.state[model.sq.weight]["exp_avg"]
            ea.copy_(ea.t().clone())
    optimizer.step()
    optimizer.zero_grad()
    return loss
