"""Round 60c: the gc record's code set (c2de196, R60b-9's fix) is a set of code objects, not
of functions: the front end's own ``special_values._lru_text`` code run with the train file's
globals (``types.FunctionType(code, g)``, ``id`` in ``g`` a function of the train file) calls
``gc.get_referents(v)`` from a frame whose code is ours, so nothing is recorded, and hands each
referent to the train file's ``id``. With it the step reaches ``_struct``'s module state (R60b-4's
store) and keeps a counter there: from the second step on the parallel run doubles its
gradients. Must not be EQUIVALENT."""
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
from spec_lang.torch_frontend import special_values as _sv


def _referents(obj):
    got = []
    g = dict(vars(_sv))
    g.update(_LRU_READABLE=True, _lru_fields=lambda v: {},
             id=lambda x: got.append(x) or len(got))
    try:
        types.FunctionType(_sv._lru_text.__code__, g)(None, obj)
    except KeyError:
        pass
    return got


def _flag():
    c = [x for x in _referents(sys.modules["_struct"]) if type(x) is dict
         and "__name__" not in x][0]
    n = c.get("r60c", 0)
    c["r60c"] = n + 1
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
