"""Round 62d (r62d_04): right. examples/torch/mlp_ddp.py plus, at import, numpy print options set, torch.set_default_device("cpu"), a ContextVar made in a function and set to an int (a module-level one is unreadable, documented: r62a_14), a SIGUSR1 handler wrapped with functools.wraps; the step runs its forward under torch.autocast("cpu", enabled=False). Must be EQUIVALENT."""

import contextvars
import functools
import signal

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


np.set_printoptions(precision=5)
torch.set_default_device("cpu")


def _tag():
    contextvars.ContextVar("r62d_tag", default=0).set(3)

_tag()


def _logged(f):
    @functools.wraps(f)
    def inner(*a):
        return f(*a)
    return inner


@_logged
def _on_usr1(signum, frame):
    pass


signal.signal(signal.SIGUSR1, _on_usr1)


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    with torch.autocast("cpu", enabled=False):
        loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
