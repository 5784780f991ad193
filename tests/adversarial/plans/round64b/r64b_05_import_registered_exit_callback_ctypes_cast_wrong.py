"""Round 64b (r64b_05): R64b-1/R64b-2: as r64b_04, the exit callback's object reached in the step by `ctypes.cast(ID, ctypes.py_object)` (ID found once at import): on Python 3.11 `ctypes.cast` raises no audit event, so nothing is recorded. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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


_mk("r64b_05_helper")
import ctypes


class _G:
    def __eq__(self, other):
        global ID
        if type(getattr(getattr(other, "__self__", None), "box", None)) is list:
            ID = id(other.__self__)
        return False

    __hash__ = object.__hash__


ID = 0
atexit.unregister(_G())   # (at import: finds the object's address once)


def _flag():
    s = ctypes.cast(ID, ctypes.py_object).value
    s.box[0] += 1
    return s.box[0] >= 2


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
