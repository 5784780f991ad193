"""Round 63d (r63d_02): ef2465bb's _module_class (a class "a global of a loaded module under its own name": its namespace not read by deep_text). At import, inside a function, a class K with n = 0 and __call__ is made, its __module__ set to "json" and bound as json.K; SIGUSR1's handler is K(). _class_texts skips K (json holds it under its name), and "the module json" reads the global K by object_text (identity, no namespace): R63b-5 open again for any class the train file binds in another module (step_state's _trusted_class asks for the class to predate the train file, R58c-1; _module_class does not). The parallel step counts in type(signal.getsignal(SIGUSR1)).n. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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
    import json

    class K:
        n = 0

        def __call__(self, *a):
            pass
    K.__module__ = "json"
    json.K = K
    signal.signal(signal.SIGUSR1, K())


_mk()


def _flag():
    K = type(signal.getsignal(signal.SIGUSR1))
    K.n += 1
    return K.n > 1


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    H["on"] = True
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
