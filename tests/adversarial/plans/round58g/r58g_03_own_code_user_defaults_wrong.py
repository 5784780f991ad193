"""Adversarial round 58g: the step counter is the default (`__defaults__`) of a function the
user built from torch's own code object (`types.FunctionType(torch.typename.__code__,
torch.typename.__globals__, "typename", (0,))`, baseline code by `own_code`), the function of a
finalizer on a torch module (`model.w0`) with no arguments. The entry names the function by its
code only; the step rebinds `__defaults__ = (n + 1,)`. From the second step on the parallel run
doubles its gradients. Must not be EQUIVALENT."""


MESH = {"dp": 2}
import copy
import types
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
    t = torch.typename
    f = types.FunctionType(t.__code__, t.__globals__, "typename", (0,))
    weakref.finalize(model.w0, f).atexit = False
    return torch.optim.SGD(model.parameters(), lr=0.1)


def _fn(optimizer):
    for f, i in list(weakref.finalize._registry.items()):
        w = i.weakref()
        if getattr(i.func, "__code__", None) is torch.typename.__code__ \
                and type(w) is nn.Linear and w.weight is optimizer.param_groups[0]["params"][0]:
            return i.func


def _get(optimizer):
    return _fn(optimizer).__defaults__[0]


def _set(optimizer, n):
    _fn(optimizer).__defaults__ = (n,)


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
        n = _get(optimizer)
        if n:
            _double(model)
        _set(optimizer, n + 1)
    optimizer.step()
    optimizer.zero_grad()
    return loss

