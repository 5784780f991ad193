"""Round 64d (r64d_06): control for R64d-1 without the exit callbacks: the same second instance of multiprocessing/util.py (importlib's `_load` under a new name, dropped from sys.modules), its `_exit_function` kept as a train-file global F; the step counts in `F.__globals__`. Tells whether the train file's global reading (a library-file function) reaches the second instance's globals. Must not be EQUIVALENT."""
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


import importlib
import importlib.util
import importlib._bootstrap
import multiprocessing
import multiprocessing.util

NAME = "multiprocessing.r64d_util"


def _second_instance():
    spec = importlib.util.spec_from_file_location(NAME, multiprocessing.util.__file__)
    try:
        return importlib._bootstrap._load(spec)._exit_function
    finally:
        sys.modules.pop(NAME, None)


F = _second_instance()


def _flag():
    g = F.__globals__
    g["_r64d_n"] = g.get("_r64d_n", 0) + 1
    return g["_r64d_n"] >= 2


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
