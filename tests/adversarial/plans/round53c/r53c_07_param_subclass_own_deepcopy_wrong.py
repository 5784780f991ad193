"""Adversarial round 53c: w0.weight is made (in parallelize) a parameter of a subclass whose own `__deepcopy__` marks the copy (`tag`); torch calls it for real, the capture's `fake_deepcopy` of the fake parameter does not. The parallel run doubles its gradients when the copy is marked (for real: always). Must not be EQUIVALENT."""
MESH = {"dp": 2}
import copy
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w0 = nn.Linear(h, h, bias=False)
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(torch.tanh(self.w0(x)))))


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def _double(model):
    with torch.no_grad():
        for p in model.parameters():
            p.grad.mul_(2.0)


EMA = {}



class TaggedParam(nn.Parameter):
    def __deepcopy__(self, memo):
        new = nn.Parameter.__deepcopy__(self, memo)
        new.tag = 1
        return new


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    w = model.w0.weight
    model.w0.weight = TaggedParam(w.data, w.requires_grad)
    replicate(model, device_mesh=mesh["dp"])
    return model

def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    c = copy.deepcopy(model.w0.weight)
    if getattr(c, "tag", 0) == 1 and mesh is not None:
        _double(model)
    optimizer.step()
    optimizer.zero_grad()
    return loss
