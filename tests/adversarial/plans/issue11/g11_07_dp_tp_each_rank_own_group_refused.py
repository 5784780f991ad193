"""Issue 11 (dp 2 x tp 2): a hand-written DDP (the model replicated over tp) whose dp group is
made by each rank alone, ``new_group([r % 2, r % 2 + 2])``: its own dp ranks, but ranks 0 / 2
and 1 / 3 make *different* groups as the same group (torch pairs groups by the order they are
made: both are the first new group). Must be refused (new_groups.check_traces)."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2, "tp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
_G = {}


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
    r = dist.get_rank()
    _G["dp"] = dist.new_group([r % 2, r % 2 + 2])   # only its own group: ranks disagree
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        g = _G["dp"]
        for p in model.parameters():
            dist.all_reduce(p.grad, group=g)
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
