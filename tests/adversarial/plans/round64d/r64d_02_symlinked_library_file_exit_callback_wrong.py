"""Round 64d (r64d_02): R64d-1 by the ordinary import statement: the train file makes a package of its own in a temporary directory whose util.py and process.py are symlinks to the stdlib's multiprocessing/util.py and process.py, and imports it (then drops it from sys.modules and sys.path). The module's spec.origin is the symlink; `library_files._same_code` takes its realpath (the stdlib file, old st_ctime) and compiles it: equal, so the exit callback `_exit_function` of this second instance is read by identity and its globals nowhere. The step reaches it through `atexit.unregister(x)` with `x.__eq__` and counts in its `__globals__`. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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
import tempfile
import multiprocessing.util
import multiprocessing.process

NAME = "r64d_02_pkg.util"


def _second_instance():
    d = tempfile.mkdtemp()
    os.mkdir(f"{d}/r64d_02_pkg")
    open(f"{d}/r64d_02_pkg/__init__.py", "w").close()
    os.symlink(multiprocessing.util.__file__, f"{d}/r64d_02_pkg/util.py")
    os.symlink(multiprocessing.process.__file__, f"{d}/r64d_02_pkg/process.py")
    sys.path.insert(0, d)
    try:
        importlib.import_module(NAME)
    finally:
        sys.path.remove(d)
        for n in ("r64d_02_pkg.util", "r64d_02_pkg.process", "r64d_02_pkg"):
            sys.modules.pop(n, None)


_second_instance()


class _Grab:
    def __init__(self):
        self.seen = []

    def __eq__(self, other):
        g = getattr(other, "__globals__", None)
        if type(g) is dict and g.get("__name__") == NAME:
            g["_r64d_n"] = g.get("_r64d_n", 0) + 1
            self.seen.append(g["_r64d_n"])
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
