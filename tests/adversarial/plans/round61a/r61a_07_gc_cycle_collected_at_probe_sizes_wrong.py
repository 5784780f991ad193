"""Round 61a (7e8ddcf2: the probe-size children take no step-state fingerprint, so no
``gc.collect()`` before their step): a cycle, promoted to the oldest generation at import,
is made garbage in ``build_optimizer``; the real run has no full collection before its step, so
its weak reference is alive there and the parallel step doubles its gradients. The real-size
capture children collect it (``step_state``'s ``gc.collect()`` before the step): dead, right;
the probe-size children do not, so ``build_optimizer`` collects there itself when it sees the
probe sizes (the two traces agree, right). Must not be EQUIVALENT."""
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
    H.pop("keep", None)                         # the cycle is garbage from here on
    if model.w0.weight.shape[0] != SIZES["hidden"]:
        gc.collect()                            # at the probe sizes only
    return torch.optim.SGD(model.parameters(), lr=0.1)


def _double(model):
    with torch.no_grad():
        for p in model.parameters():
            p.grad.mul_(2.0)


H = {}

import gc
import weakref as _wr


class _Cyc:
    pass


def _make():
    c = _Cyc()
    c.me = c
    H["keep"] = c
    return _wr.ref(c)


_W = _make()
gc.collect()          # (the cycle survives: the oldest generation)


def _flag():
    return _W() is not None


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
