"""Round 61a (7e8ddcf2: the probe-size children no longer run the stale-reference search,
``refuse_held``): ``build_model`` keeps the model's first weight in a global; at the probe sizes
only, the step's forward reads that held (pre-capture) parameter instead of ``self.w0.weight``.
In the real run the two are the same object (the plan is right as it runs); the question is
what the probe trace, which now is not searched, does to the verdict (crash, false refusal)."""
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
        if x.shape[-1] != SIZES["hidden"] and "w0" in HELD:      # the probe sizes only
            h = nn.functional.linear(x, HELD["w0"])
        else:
            h = self.w0(x)
        return self.w2(nn.functional.silu(self.w1(torch.tanh(h))))


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


HELD = {}


def build_model(s):
    m = MLP(s["hidden"], s["ffn"])
    if s["hidden"] != SIZES["hidden"]:          # held at the probe sizes only
        HELD["w0"] = m.w0.weight
    return m


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def _double(model):
    with torch.no_grad():
        for p in model.parameters():
            p.grad.mul_(2.0)


H = {}


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    H["on"] = True
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
