"""Round 65a (r65a_03, control of r65a_02): R64e-1 again past 02a10fab's `_module_holds`: it trusts the function's writable `__module__`. The original multiprocessing.util (its `_exit_function` in `_PRESENT`) is popped and imported again, globals naming it rebound (r64e_01); then `old._exit_function.__module__ = "r65a_mp_old"` and `sys.modules["r65a_mp_old"] = old`: sys.modules holds, under the function's `__module__`, the module whose vars are its `__globals__`, so the callback is read by identity; the module kept under a plain name, its globals read as another module's (an int by value): the counter should be seen. The step counts in the original's globals through `atexit.unregister`'s `==`. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""

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
import multiprocessing
import multiprocessing.util

NAME = "multiprocessing.util"


_OLD = []


def _displace():
    # the original multiprocessing.util (imported by torch before the train file ran: its
    # _exit_function is one of the exit callbacks present then, read by identity) is dropped
    # from sys.modules and imported again: sys.modules (and multiprocessing.util) now hold a
    # new module; the original's globals are in no sys.modules entry
    old = sys.modules.pop(NAME)
    _OLD.append(old)
    new = importlib.import_module(NAME)
    # every module global naming the original (multiprocessing.connection's `util`, ...) now
    # names the new one: the original is reachable only through its functions' __globals__
    for m in list(sys.modules.values()):
        d = getattr(m, "__dict__", None)
        if type(d) is dict:
            for k, v in list(d.items()):
                if v is old:
                    d[k] = new


_displace()

HIDE = "r65a_mp_old"
# the original kept under a name of the train file's choosing; its exit callback's __module__
# (writable) names it: sys.modules holds, under __module__, the module whose vars are its globals
sys.modules[HIDE] = _OLD[0]
_OLD[0]._exit_function.__module__ = HIDE
_OLD.clear()    # (no train-file global holds the original)


class _Grab:
    def __init__(self):
        self.seen = []

    def __eq__(self, other):
        g = getattr(other, "__globals__", None)
        if type(g) is dict and g.get("__name__") == NAME \
                and g is not vars(sys.modules[NAME]):
            g["_r64e_n"] = g.get("_r64e_n", 0) + 1
            self.seen.append(g["_r64e_n"])
        return False

    __hash__ = object.__hash__


def _flag():
    g = _Grab()
    atexit.unregister(g)
    return bool(g.seen) and g.seen[-1] >= 2


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
