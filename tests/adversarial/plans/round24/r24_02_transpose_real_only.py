"""Adversarial finding R24-1 (round 24, rebuilt in stop 33): a ``t()`` only at the real sizes.
``hidden`` and ``ffn`` are both 6 at the real sizes, so every weight gradient is square there
(and not at the probe sizes, where every dim has its own prime): the step transposes each
square averaged gradient, a wrong update. Was EQUIVALENT (an extra data-movement node at the
real sizes was never compared)."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 6}


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
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
            g = p.grad
            if g.shape[0] == g.shape[1]:
                g = g.t()
            p.grad.copy_(g.clone())
    optimizer.step()
    optimizer.zero_grad()
    return loss
