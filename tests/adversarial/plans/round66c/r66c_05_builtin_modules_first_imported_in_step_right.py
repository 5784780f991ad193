"""Round 66c (r66c_05, right): the parallel step lazily imports built-in modules no one imported before (tracemalloc -> _tracemalloc, symtable -> _symtable) and only queries them (tracemalloc.is_tracing(), symtable of a tiny source); the single step does the same. Must be EQUIVALENT (import_origin's stricter built-in rule: importlib's own BuiltinImporter and sys.modules[spec.name] is the module)."""
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
    import tracemalloc
    import symtable
    t = symtable.symtable("x = 1", "<r66c>", "exec")
    return tracemalloc.is_tracing() or t.get_type() != "module"


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    H["on"] = True
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if _flag():
        _double(model)
    optimizer.step()
    optimizer.zero_grad()
    return loss
