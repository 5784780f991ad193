"""Round 61a (R61a-2): c_settings reads the C environment through ``POINTER(c_char_p)``, and
``ctypes.POINTER`` answers from ctypes' ``_pointer_type_cache`` dict, which the train file fills
at import with a class whose ``in_dll`` hands ``c_settings._c_environ`` an empty environment.
Its step keeps a counter in the C environment (``os.putenv``, read back with libc ``getenv``):
from the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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

import ctypes as _ct

def _install():           # (no global holds the pointer class: unreadable, R60b b10/b11)
    class _P(_ct.POINTER(_ct.c_char_p)):
        @classmethod
        def in_dll(cls, lib, name):
            if sys._getframe(1).f_code.co_name == "_c_environ":
                return [None]
            return super().in_dll(lib, name)

    _ct._pointer_type_cache[_ct.c_char_p] = _P


_install()


def _flag():
    _getenv = _ct.CDLL(None).getenv     # (a local: a global CDLL is unreadable)
    _getenv.restype = _ct.c_char_p
    v = _getenv(b"R61A_STEP")
    n = int(v or 0)
    os.putenv("R61A_STEP", str(n + 1))
    return n > 0


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
