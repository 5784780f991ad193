"""Round 60b: the gc record (R60a-2's fix: the caller's code object must be one of
``spec_lang``'s functions, modules taken in when first seen) passed by a module the train file
makes under a ``spec_lang.`` name before the step: ``_ours`` takes in every ``spec_lang.*``
module of ``sys.modules`` it has not seen, so a function compiled under a ``spec_lang`` file name
and put there is "ours", and its ``gc.get_referrers`` goes unrecorded. It finds the C codec
cache and swaps the standard ``koi8_t`` entry for an equal fresh one from ``getregentry()`` (in
``encodings._cache`` too): both fingerprints read it as ``<standard>``, but its ``id`` moved.
From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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

import codecs
import encodings
import encodings.koi8_t
import gc
import importlib.util
import types

_SRC = '''
def swap(name, entry):
    utf8 = codecs.lookup("utf-8")
    c = [r for r in gc.get_referrers(utf8) if type(r) is dict and r is not encodings._cache
         and r.get("utf_8") is utf8][0]
    encodings._cache[name] = entry
    c[name] = entry
'''
_M = types.ModuleType("spec_lang.r60b_made")
sys.modules["spec_lang.r60b_made"] = _M
vars(_M).update({"gc": gc, "codecs": codecs, "encodings": encodings})
exec(compile(_SRC, importlib.util.find_spec("spec_lang").submodule_search_locations[0]
             + "/r60b_made.py", "exec"), vars(_M))
_ID0 = id(codecs.lookup("koi8_t"))


def _flag():
    hit = id(codecs.lookup("koi8_t")) != _ID0
    if not hit:
        _M.swap("koi8_t", encodings.koi8_t.getregentry())
    return hit


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
