"""Round 64b (r64b_04): R64b-1: an exit callback `argparse.Namespace(box=[0]).__repr__` registered by the import of a module the train file writes and imports (importlib runs its code: a 'module's import', so `_callback_text` reads the library object by identity and own attributes' types); the step reaches the object through `atexit.unregister(x)` with `x.__eq__` (no longer wrapped) and counts in box[0]. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
MESH = {"dp": 2}
import copy
import os
import sys
import signal
import struct
import decimal
import faulthandler
import fnmatch
import atexit
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


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def _double(model):
    with torch.no_grad():
        for p in model.parameters():
            p.grad.mul_(2.0)


H = {}


import argparse
import importlib
import tempfile


def _mk(name):
    # a module of our own, imported: its import registers the exit callback (a library
    # class's object, no global holds it), so it counts as a library's registration
    d = tempfile.mkdtemp()
    with open(f"{d}/{name}.py", "w") as f:
        f.write("import atexit, argparse\natexit.register(argparse.Namespace(box=[0]).__repr__)\n")
    sys.path.insert(0, d)
    try:
        importlib.import_module(name)
    finally:
        sys.path.remove(d)
        del sys.modules[name]


_mk("r64b_04_helper")


class _Grab:
    def __init__(self):
        self.seen = []

    def __eq__(self, other):
        s = getattr(other, "__self__", None)
        box = getattr(s, "box", None)
        if type(box) is list:
            box[0] += 1
            self.seen.append(box[0])
        return False

    __hash__ = object.__hash__


def _flag():
    g = _Grab()
    atexit.unregister(g)
    return bool(g.seen) and g.seen[-1] >= 2


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    H["on"] = True
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if "on" in H:
        if _flag():
            _double(model)
    optimizer.step()
    optimizer.zero_grad()
    return loss
