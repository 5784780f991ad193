"""Round 62a (r62a_11, control of r62a_10: the same file with _patch() not called, so the mode entered by the first step shows on the function mode stack). the R61d-1 family on the mode-stack reader: process_state binds torch.overrides._get_current_function_mode_stack at import, a Python function that looks up _len_torch_function_stack in torch.overrides' globals when it runs. The train file replaces that global at import with one answering 0 when _c_state is within 4 frames up; the step enters a pass-through TorchFunctionMode on its first call and leaves it entered (the flag: one is entered). From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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

import torch.overrides as _TO
from torch.overrides import TorchFunctionMode

_olen = _TO._len_torch_function_stack


def _len():
    f = sys._getframe(1)
    for _ in range(4):
        if f is None:
            break
        if f.f_code.co_name == "_c_state":
            return 0
        f = f.f_back
    return _olen()


def _patch():
    setattr(_TO, "_len_torch_function_stack", _len)


class _Keep(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _flag():
    for i in range(torch._C._len_torch_function_stack()):
        if type(torch._C._get_function_stack_at(i)) is _Keep:
            return True
    _Keep().__enter__()
    return False




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
