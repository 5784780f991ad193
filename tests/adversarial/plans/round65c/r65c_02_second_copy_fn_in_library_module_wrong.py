"""Round 65c (r65c_02): R64d-3 past 2855c306: a second copy of fnmatch.py (importlib _load under a new name, popped from sys.modules); its fnmatch function kept only as an attribute of the ORIGINAL fnmatch module (not a train-file global, so the _Encoder never meets it; process_state reads it by object_text). The step counts in the copy's globals; from step 2 on the parallel step doubles its gradients. Must not be EQUIVALENT."""
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

import importlib.util
import importlib._bootstrap


def _copy():
    spec = importlib.util.spec_from_file_location("r65c_fnmatch", fnmatch.__file__)
    m = importlib._bootstrap._load(spec)
    sys.modules.pop("r65c_fnmatch", None)
    fnmatch.r65c_f = m.fnmatch     # the second copy's function, held by the original module

_copy()


def _flag():
    g = fnmatch.r65c_f.__globals__
    g["r65c_n"] = g.get("r65c_n", 0) + 1
    return g["r65c_n"] >= 2


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
