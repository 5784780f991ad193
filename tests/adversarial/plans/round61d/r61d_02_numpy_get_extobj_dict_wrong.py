"""Round 61d (R61d-2: process_state binds ``numpy.geterr`` at import (R61b), but numpy's geterr is a Python function that looks up ``_get_extobj_dict`` in its module's globals (``numpy._core._ufunc_config``) when it runs. The train file replaces that global at import with one answering the import-time settings when ``_c_state`` is on the stack; the step toggles ``np.seterr(over=...)``. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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

import numpy as np
_UC = sys.modules[np.geterr.__module__] if np.geterr.__module__ != "numpy" else None
_UC = sys.modules[np.geterr.__code__.co_filename and "numpy._core._ufunc_config"]
_oge = _UC._get_extobj_dict
_E0 = _oge()
def _ge():
    f = sys._getframe(1)
    for _ in range(4):
        if f is None:
            break
        if f.f_code.co_name == "_c_state":
            return dict(_E0)
        f = f.f_back
    return _oge()
def _patch():
    setattr(_UC, "_get_extobj_dict", _ge)
def _flag():
    on = _oge()["over"] == "ignore"
    np.seterr(over="warn" if on else "ignore")
    return on

_patch()

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
