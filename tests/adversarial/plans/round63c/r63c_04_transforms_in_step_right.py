"""Round 63c (r63c_04): a right plan (examples/torch/mlp_ddp.py) using what f6b296aa now reads or
refuses, the normal way: torch.set_printoptions at import (torch's print options, now read), and
in train_step (both sides) a forward-AD dual level entered and left, torch.func.vmap / grad /
jvp on a side tensor, and a CPU autocast region (each level entered and left inside the step,
so none is left for `modes_entered`/`levels`). Must stay EQUIVALENT (exit 0)."""

import torch
import torch.autograd.forward_ad as fwAD
import torch.distributed as dist
import torch.func
from torch import nn

torch.set_printoptions(precision=6, sci_mode=False)

MESH = {"dp": 2}
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


def _side_checks():
    t = torch.ones(3, 2)
    torch.func.vmap(lambda r: r * 2)(t)
    torch.func.grad(lambda r: (r * r).sum())(torch.ones(2))
    torch.func.jvp(lambda r: r * 2, (torch.ones(2),), (torch.ones(2),))
    with fwAD.dual_level():
        d = fwAD.make_dual(torch.ones(2), torch.ones(2))
        fwAD.unpack_dual(d * 2)


def train_step(model, optimizer, batch, mesh):
    _side_checks()
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
