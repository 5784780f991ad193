"""Adversarial round 58e: the step counter is the argument of a `weakref.finalize` that only
the finalize registry holds; `build_optimizer` rebinds `weakref.finalize._registry` to a dict
subclass whose own `items()` leaves that finalizer out. "finalizers pending"
(`process_state._c_state`) iterates the registry through its `items()` (the train file's code,
run inside the fingerprint), so the finalizer's arguments are never read; the class attribute
itself is read by identity only. The step bumps the registered `_Info.args`. From the second
step on the parallel run doubles its gradients. Must not be EQUIVALENT."""

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


class _Registry(dict):
    def items(self):
        return [(k, i) for k, i in dict.items(self) if i.func is not _noop]


def build_optimizer(model):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    if type(weakref.finalize._registry) is not _Registry:
        weakref.finalize._registry = _Registry(weakref.finalize._registry)
    weakref.finalize(opt, _noop, 0)
    return opt


def _info(optimizer):
    return next(i for f, i in dict.items(weakref.finalize._registry)
                if i.func is _noop and i.weakref() is optimizer)


def _get(optimizer):
    return _info(optimizer).args[0]


def _set(optimizer, n):
    _info(optimizer).args = (n,)


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

