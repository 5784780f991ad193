"""Adversarial round 57b: a right plan whose optimizer holds a ``bytearray`` subclass instance (never changed): a control for r57b_01 without its line filling ``torch._opaque_base._FakeScriptObject_cls`` (torch's lazy class cache, filled at its first ``isinstance`` miss against an opaque type). Must be EQUIVALENT."""
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


class _Box(bytearray):
    pass


def build_optimizer(model):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt.r57b = _Box(b"x")
    opt.r57b.n = 0
    return opt


def _get(optimizer):
    return optimizer.r57b.n


def _set(optimizer, n):
    optimizer.r57b.n = n


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
    optimizer.step()
    optimizer.zero_grad()
    return loss

