"""Round 66d (r66d_01, R66d-1): R66a-1's counter (each parallel step loads a library file once more under a fresh name, kept in sys.modules, and counts the copies) with a file that defines no plain function (keyword.py) and every other source rewritten after the load: the exact ModuleSpec's loader replaced by object() (no file loader: its path is not read), its origin set to an existing file no module came from, another per copy (/etc/passwd, /etc/group, ...; none written), __file__ deleted. import_origin: made by an import; file_copies: no shared file. From step 2 on the parallel step doubles its gradients. Must not be EQUIVALENT."""
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


import keyword  # noqa: E402
import importlib.util  # noqa: E402
import importlib._bootstrap  # noqa: E402


def _flag():
    # a further instance of keyword.py (no plain function) under a name first imported now
    k = 0
    while f"r66d_kw{k}" in sys.modules:
        k += 1
    spec = importlib.util.spec_from_file_location(f"r66d_kw{k}", keyword.__file__)
    m = importlib._bootstrap._load(spec)
    m.__spec__.loader = object()
    m.__spec__.origin = ["/etc/passwd", "/etc/group", "/etc/hosts", "/etc/hostname"][k]
    del m.__file__
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
