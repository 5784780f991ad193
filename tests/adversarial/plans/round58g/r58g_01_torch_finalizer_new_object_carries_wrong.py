"""Adversarial round 58g: the step counter rides on torch's own finalizers (`torch.typename` on
an `nn.Linear` made in the step, kept alive by the finalizer's own arguments). Each step detaches
the newest one (its object dies: an entry that disappears is no change) and registers a new one on
a fresh `nn.Linear` with the counter + 1 (an entry that appears is no change). From the second step
on the parallel run doubles its gradients. Must not be EQUIVALENT."""


MESH = {"dp": 2}
import copy
import functools
import weakref
import torch
from torch import nn
from torch._library.fake_class_registry import FakeScriptObject
import torch._opaque_base

# torch's lazy class cache, filled as its first isinstance miss would (same on both sides)
torch._opaque_base._FakeScriptObject_cls = FakeScriptObject

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


def _noop(n):
    return None


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def _mine():
    out = []
    for f, i in list(weakref.finalize._registry.items()):
        if i.func is torch.typename and len(i.args) == 2 and type(i.args[1]) is int:
            out.append((f, i))
    return out


def _get():
    m = _mine()
    if not m:
        return 0
    f, i = m[0]
    n = i.args[1]
    f.detach()
    return n


def _set(n):
    lin = nn.Linear(1, 1, bias=False)
    weakref.finalize(lin, torch.typename, lin, n).atexit = False


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
        n = _get()
        if n:
            _double(model)
        _set(n + 1)
    optimizer.step()
    optimizer.zero_grad()
    return loss

