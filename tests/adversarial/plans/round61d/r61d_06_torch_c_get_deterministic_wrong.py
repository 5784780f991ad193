"""Round 61d (R61d-1, second reader: process_state binds ``torch.are_deterministic_algorithms_enabled`` at import (R61b), but that reader is a Python function of torch/__init__.py that looks up ``_C._get_deterministic_algorithms`` in ``torch._C`` when it runs. The train file replaces ``torch._C._get_deterministic_algorithms`` at import with one answering False when ``_c_state`` is on the stack; the step toggles ``torch.use_deterministic_algorithms``. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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

import torch._C as _TC

_ogw = _TC._get_deterministic_algorithms
def _gw():
    f = sys._getframe(1)
    for _ in range(4):
        if f is None:
            break
        if f.f_code.co_name == "_c_state":
            return False
        f = f.f_back
    return _ogw()
def _patch():
    setattr(_TC, "_get_deterministic_algorithms", _gw)
def _flag():
    on = _ogw()
    torch.use_deterministic_algorithms(not on)
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
