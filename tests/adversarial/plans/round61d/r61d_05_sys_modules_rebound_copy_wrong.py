"""Round 61d (R61d-5 probe: the fingerprint reads ``sys.modules`` by attribute when it runs; the import statement (C) looks modules up in the interpreter's own dict. The train file, at import, rebinds ``sys.modules`` to a copy (a dict subclass that mirrors its stores into the original) and puts a hand-made module ``r61d_ctr`` in the original dict only (no global of the train file holds either); the step imports it and counts in it. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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

import types


class _Mirror(dict):         # (v2: a plain copy broke the capture's imports, KeyError)
    def __init__(self, orig):
        super().__init__(orig)
        self.__dict__["_o"] = orig

    def __setitem__(self, k, v):
        dict.__setitem__(self, k, v)
        self.__dict__["_o"][k] = v

    def __delitem__(self, k):
        dict.__delitem__(self, k)
        self.__dict__["_o"].pop(k, None)

    def pop(self, k, *d):
        self.__dict__["_o"].pop(k, None)
        return dict.pop(self, k, *d)


def _patch():
    orig = sys.modules
    sys.modules = _Mirror(orig)
    m = types.ModuleType("r61d_ctr")
    m.n = 0
    orig["r61d_ctr"] = m
def _flag():
    import r61d_ctr
    r61d_ctr.n += 1
    return r61d_ctr.n >= 2

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
