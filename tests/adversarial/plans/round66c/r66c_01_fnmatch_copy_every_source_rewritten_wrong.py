"""Round 66c (r66c_01, R66c-1): R66b-3's counter (each parallel step loads fnmatch.py once more under a fresh name, kept in sys.modules, and counts the copies) with every source file the copy names rewritten after the load to an existing file no module came from, another per copy (/etc/passwd, /etc/group, ...: no file is written): the spec's origin, __file__, the spec's loader replaced by an exact SourceFileLoader whose path is that file, and each function's __code__ replaced by one whose co_filename is that file (the copy still works). The module's __loader__ and __cached__ / spec.cached (still fnmatch's) are not read by file_copies. From step 2 on the parallel step doubles its gradients. Must not be EQUIVALENT."""
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


import fnmatch  # noqa: E402,F811
import importlib.util  # noqa: E402
import importlib._bootstrap  # noqa: E402
import importlib.machinery  # noqa: E402
import types  # noqa: E402


def _flag():
    # a further instance of fnmatch.py under a name first imported now (kept in
    # sys.modules): (its import registers nothing)
    k = 0
    while f"r66c_fnm{k}" in sys.modules:
        k += 1
    spec = importlib.util.spec_from_file_location(f"r66c_fnm{k}", fnmatch.__file__)
    m = importlib._bootstrap._load(spec)
    # every file the copy names: an existing file no module came from, one per copy
    f = ["/etc/passwd", "/etc/group", "/etc/hosts", "/etc/hostname"][k]
    m.__spec__.origin = f
    m.__file__ = f
    m.__spec__.loader = importlib.machinery.SourceFileLoader(f"r66c_fnm{k}", f)
    for v in list(vars(m).values()):
        if type(v) is types.FunctionType and v.__globals__ is vars(m):
            v.__code__ = v.__code__.replace(co_filename=f)
    return k >= 1


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
