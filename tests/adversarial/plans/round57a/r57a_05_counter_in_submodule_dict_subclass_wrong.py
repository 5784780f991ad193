"""Adversarial round 57a: the step counter is an attribute of a submodule (``model.w0``) whose ``__dict__`` is replaced by a ``dict`` subclass whose ``items()`` returns ``[]`` (R57a-3's module form). From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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


class _Quiet(dict):
    def items(self):
        return []


def build_model(s):
    m = MLP(s["hidden"], s["ffn"])
    m.w0.__dict__ = _Quiet(m.w0.__dict__, r57a=0)
    return m


def build_optimizer(model):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return opt


def _double(model):
    with torch.no_grad():
        for p in model.parameters():
            p.grad.mul_(2.0)


H = {}


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    H["on"] = True
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    import json
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if "on" in H:
        d = model.w0.__dict__
        n = dict.__getitem__(d, "r57a")
        if n:
            _double(model)
        dict.__setitem__(d, "r57a", n + 1)
    optimizer.step()
    optimizer.zero_grad()
    return loss

