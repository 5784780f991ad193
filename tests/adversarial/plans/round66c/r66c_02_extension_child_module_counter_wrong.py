"""Round 66c (r66c_02, R66c-2): a counter kept as hand-made modules under torch._C: each parallel step makes a types.ModuleType named torch._C._r66c_x<k> with no spec and __file__ = torch._C.__file__, sets it as torch._C's attribute _r66c_x<k> and as sys.modules' entry of that name. import_origin takes a no-spec module with an existing __file__ as made by an import; file_copies exempts it as a C extension's child (_extension_child: held by its parent under its last name, in the parent's file), so the shared file is no FILE_COPY; the parent's new attribute is the new submodule. From step 2 on the parallel step doubles its gradients. Must not be EQUIVALENT."""
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
    # a further hand-made module under torch._C, in torch._C's file, held by its parent
    k = 0
    while f"torch._C._r66c_x{k}" in sys.modules:
        k += 1
    m = types.ModuleType(f"torch._C._r66c_x{k}")
    m.__file__ = torch._C.__file__
    setattr(torch._C, f"_r66c_x{k}", m)
    sys.modules[f"torch._C._r66c_x{k}"] = m
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
