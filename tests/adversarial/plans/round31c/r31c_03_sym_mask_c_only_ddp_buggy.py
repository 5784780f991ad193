"""Round 31c: ``r31c_01`` with the plan masking by ``c`` alone (``W * c`` for
``W * (c | c.t())``), dp 2. The IRs differ (``c`` vs ``c + c - c c``): UNKNOWN (rewrite-stuck),
not accepted. Truth: grad:sq.weight 0.066."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

MESH = {"dp": 2}
DATA_SHARDING = {"x": {"dp": 0}, "y": {"dp": 0}, "c": {}}
SIZES = {"batch": 8, "d": 8, "h": 16, "vocab": 12}


class MLP(nn.Module):
    def __init__(self, d, h, v):
        super().__init__()
        self.l0 = nn.Linear(d, h)
        self.sq = nn.Linear(h, h)
        self.l1 = nn.Linear(h, v)
        self.sym = True          # the mask made symmetric: c | c^T

    def forward(self, x, c):
        h = torch.tanh(self.l0(x))
        c = c | c.t() if self.sym else c
        return self.l1(h + F.linear(h, self.sq.weight * c, self.sq.bias))


def build_model(s):
    return MLP(s["d"], s["h"], s["vocab"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["d"]), "y": torch.zeros(s["batch"], dtype=torch.long),
            "c": torch.zeros(s["h"], s["h"], dtype=torch.bool)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.5)


def parallelize(model, mesh):
    model.sym = False        # the bug: the plan masks with c, not c | c^T
    return model


def train_step(model, optimizer, batch, mesh):
    loss = F.cross_entropy(model(batch["x"], batch["c"]), batch["y"])
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
