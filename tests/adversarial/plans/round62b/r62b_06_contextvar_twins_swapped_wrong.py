"""Round 62b (r62b_06): two ContextVars of the same name, made and set at import inside a function (held by the current Context only), values 0 and 1; the step swaps their values (the variables told apart by id) and the flag is the first one's value before the swap. The context variables' text is name, _ident(v) (the type's name, not the identity) and value, sorted: the same before and after a swap. parallelize resets. The parallel run doubles its gradients at step 2 (and every even step). Must not be EQUIVALENT."""
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

import contextvars


def _vars():
    return sorted([v for v in contextvars.copy_context() if v.name == "r62b_twin"], key=id)


def _make():
    contextvars.ContextVar("r62b_twin").set(0)
    contextvars.ContextVar("r62b_twin").set(1)

_make()


def RESET():
    lo, hi = _vars()
    lo.set(0)
    hi.set(1)


RESET()


def _flag():
    lo, hi = _vars()
    a = lo.get()
    lo.set(hi.get())
    hi.set(a)
    return a == 1


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    H["on"] = True
    RESET()
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
