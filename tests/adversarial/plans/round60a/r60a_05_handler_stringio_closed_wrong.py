"""Round 60a: the SIGUSR1 handler partial holds an `io.StringIO`; the step closes it and
`closed` is the flag (a closed StringIO's `getvalue` raises `ValueError`, which `c_data.c_value`
calls while the fingerprint is taken). From the second step on the parallel run doubles its
gradients. Must not be EQUIVALENT (an error is not)."""
MESH = {"dp": 2}
import copy
import collections
import io
import operator
import functools
import signal
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


def _noop(*a):
    return None


def _handler(obj, sig, frame):
    return obj


def build_optimizer(model):
    signal.signal(signal.SIGUSR1, functools.partial(_handler, io.StringIO('abc')))
    return torch.optim.SGD(model.parameters(), lr=0.1)


def _obj():
    return signal.getsignal(signal.SIGUSR1).args[0]


def _get(optimizer):
    return int(_obj().closed)


def _set(optimizer, n):
    _obj().close()


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

