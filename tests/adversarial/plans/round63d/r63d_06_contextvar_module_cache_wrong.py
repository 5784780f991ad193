"""Round 63d (r63d_06): ef2465bb's _module_variable cache (_MODULE_VARS: a context variable found once in a loaded module's globals is "a module's" for the rest of the process, its non-plain default read by identity). At import, inside a function, a ContextVar("r63d_steps", default=[0]) is set to 0 and bound as json.r63d_v; parallelize deletes json.r63d_v; the parallel step counts in the default list (contextvars.Context().run(v.get)). Caught only if no fingerprint of this process saw json holding it. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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


def _mk():
    import contextvars
    import json
    v = contextvars.ContextVar("r63d_steps", default=[0])
    v.set(0)
    json.r63d_v = v


_mk()


def _flag():
    import contextvars
    v = next(k for k in contextvars.copy_context() if k.name == "r63d_steps")
    box = contextvars.Context().run(v.get)
    box[0] += 1
    return box[0] > 1


def parallelize(model, mesh):
    import json
    from torch.distributed._composable.replicate import replicate
    H["on"] = True
    json.__dict__.pop("r63d_v", None)
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    prior = "on" in H and _flag()
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if prior:
        _double(model)
    optimizer.step()
    optimizer.zero_grad()
    return loss
