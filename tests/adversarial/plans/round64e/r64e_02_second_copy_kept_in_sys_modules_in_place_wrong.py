"""Round 64e (r64e_02): a second copy of multiprocessing/util.py loaded under the new name multiprocessing.r64e_util and KEPT in sys.modules (so 0a698f6a's `library_callbacks` counts its `_exit_function` as a library's, by identity); its globals are read as a library module's, by what they name. The step reaches the copy's `_exit_function` through `atexit.unregister(x)` with `x.__eq__` and advances the copy's `_afterfork_counter` (an itertools.count) in place. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT (expected: the in-place family, R10-1 / R11-6: see r64e_03)."""

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


import importlib
import importlib.util
import importlib._bootstrap
import multiprocessing
import multiprocessing.util

NAME = "multiprocessing.r64e_util"

# a second copy of the stdlib's multiprocessing/util.py under a new name, KEPT in sys.modules:
# its import registers its _exit_function, a library file's code, while sys.modules holds it
# (0a698f6a: read by identity); its globals are read as a library module's, by what they name
importlib._bootstrap._load(importlib.util.spec_from_file_location(
    NAME, multiprocessing.util.__file__))


class _Grab:
    def __init__(self):
        self.seen = []

    def __eq__(self, other):
        g = getattr(other, "__globals__", None)
        if type(g) is dict and g.get("__name__") == NAME:
            # an itertools.count global of the copy, advanced in place
            self.seen.append(next(g["_afterfork_counter"]))
        return False

    __hash__ = object.__hash__


def _flag():
    g = _Grab()
    atexit.unregister(g)
    return bool(g.seen) and g.seen[-1] >= 1


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
