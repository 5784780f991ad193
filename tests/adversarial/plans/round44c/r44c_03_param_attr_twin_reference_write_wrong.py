"""Idea: a parameter attribute whose value is another parameter (param_attrs.carried copies the
reference: in the traced step it is the pre-capture object, not the traced parameter). Spec
(build_model): w1.weight.twin = w2.weight. Plan: DDP-style replicate keeps the objects;
parallelize re-points twin to w1.weight itself. train_step halves p.twin under no_grad after
the step: spec halves w2, the real plan halves w1. If writes to the pre-capture objects are not
traced on either side: EQUIVALENT while wrong.
"""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    m = MLP(s["hidden"], s["ffn"])
    m.w1.weight.twin = m.w2.weight
    return m


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    model.w1.weight.twin = model.w1.weight
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    with torch.no_grad():
        model.w1.weight.twin.mul_(0.5)
    return loss
