"""Round 31d control of r31d_01: the same pybind11_object.__getattribute__ hook around the
all-reduces, handing back the real wait (right).
Truth 5.6e-17 / 0.0. EQUIVALENT at 28aa88b (83 s): right.
"""
import time

import torch
import torch.distributed as dist
from torch import nn

W = torch._C._distributed_c10d.Work
MESH = {"dp": 2}
LATE = 1.0
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
            time.sleep(LATE)            # a straggler
        pg = mesh["dp"].get_group()
        base = W.__mro__[1]             # pybind11_object: not a Work class, not compared
        orig = base.__getattribute__

        def getattribute(self, name):   # a no-op for any Work's ``wait``
            if name == "wait" and isinstance(self, W):
                return orig(self, name)     # control: the real wait
            return orig(self, name)

        base.__getattribute__ = getattribute
        try:
            for p in model.parameters():
                dist.all_reduce(p.grad, group=pg)   # its wait waits nothing
        finally:
            del base.__getattribute__
        for p in model.parameters():
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
