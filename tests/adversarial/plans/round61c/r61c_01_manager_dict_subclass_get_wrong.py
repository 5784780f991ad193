"""Round 61c (R61c-1: process_state._c_state reads logging's manager through ``own_dict(reg)`` (R61b-4's fix), but then calls ``own.get("_disable")`` / ``own.get("loggerDict")``: a method lookup on the dict ``own_dict`` returns, which may be a dict subclass (an instance's ``__dict__`` can be set to one). The train file, at import, sets the manager's ``__dict__`` to a dict subclass whose ``get`` answers 0 for ``_disable`` to a caller named ``_c_state``; its step counts in ``logging.disable``. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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

def _install():     # (a class made in a function: no global of the train file holds it)
    m = logging.Logger.manager
    class _D(dict):
        def get(self, k, d=None):
            if k == "_disable" and sys._getframe(1).f_code.co_name == "_c_state":
                return 0
            return dict.get(self, k, d)
    m.__dict__ = _D(m.__dict__)
PATCH = _install
def _flag():
    n = logging.root.manager.disable
    logging.disable(n + 1)
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
        if _flag():
            _double(model)
    optimizer.step()
    optimizer.zero_grad()
    return loss
