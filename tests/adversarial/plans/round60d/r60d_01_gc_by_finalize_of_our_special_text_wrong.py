"""Round 60d: the gc record's stack walk (297ba88, R60c-2) sees no train-file frame when the
front end's own ``special_values.special_text`` is run by a ``weakref.finalize`` callback of
the step's garbage (a cycle): the front end's ``step_state`` collects it (``gc.collect()``) from
a stack of the front end's frames and the standard library's ``weakref.finalize.__call__``, so
the ``gc.get_referents`` call is unrecorded and the train file's encoder receives the real dict
of ``int``, a static type no fingerprint reads, and keeps a counter there (in the real run an
automatic collection of the young generation runs the finalizer). From the second step on the
parallel run doubles its gradients. Must not be EQUIVALENT."""
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

from spec_lang.torch_frontend import special_values as _sv


class _Enc:
    uncomparable = unreadable = False

    def enc(self, x):
        x["r60d"] = x.get("r60d", 0) + 1
        return ""

    def _attrs(self, v):
        return ""


class _Junk:
    pass


def _arm():
    junk = _Junk()
    junk.me = junk              # a cycle: freed by a collection only
    weakref.finalize(junk, _sv.special_text, _Enc(), int.__dict__)


def _flag():
    return int.__dict__.get("r60d", 0) > 0


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
    if "on" in H:
        _arm()
    return loss
