"""Round 61c (R61c-3: step_state.step_state walks the model with ``model.named_modules(remove_duplicate=False)``, a method looked up on ``torch.nn.Module`` when the fingerprint runs. The train file, at import, replaces ``nn.Module.named_modules`` with one answering every module but ``w0`` to a caller named ``step_state`` (the original to every other caller); its step counts in a plain attribute of the submodule ``w0`` (``model.w0._r61c``), whose own attributes the fingerprint then never reads. The ``torch.nn.modules.module`` entry marks ``Module`` the user's (UNCOMPARABLE), alike before and after. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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

import ctypes
import gc
import logging

def _install():     # (in a function: no global of the train file holds the original)
    orig = nn.Module.named_modules

    def named_modules(self, *a, **k):
        if sys._getframe(1).f_code.co_name == "step_state":
            return iter([(n, m) for n, m in orig(self, *a, **k)
                         if n != "w0"])     # all but w0, to the fingerprint only
        return orig(self, *a, **k)
    nn.Module.named_modules = named_modules
PATCH = _install
def _flag(model):
    m = model.w0
    n = m.__dict__.get("_r61c", 0)
    m._r61c = n + 1
    return n > 0

PATCH()

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
        if _flag(model):
            _double(model)
    optimizer.step()
    optimizer.zero_grad()
    return loss
