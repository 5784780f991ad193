"""Round 66c (r66c_04, R66c-3, no file at all): R66b-2's counter (each parallel step loads fnmatch.py once more, kept in sys.modules) under a frozen module's name no one imported (__hello__, __phello__, __hello_only__, __hello_alias__: _imp.is_frozen), with after the load the spec's origin "frozen", its loader importlib's FrozenImporter, __file__ deleted and each function's co_filename "<frozen fnmatch>" (names in <...> are skipped): import_origin's frozen rule holds (sys.modules[spec.name] is the module, importlib's own importer), _files finds no file. From step 2 on the parallel step doubles its gradients. Must not be EQUIVALENT."""
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


import fnmatch  # noqa: E402,F811
import importlib.util  # noqa: E402
import importlib._bootstrap  # noqa: E402
import importlib.machinery  # noqa: E402
import types  # noqa: E402


_FROZEN = ["__hello__", "__phello__", "__hello_only__", "__hello_alias__"]


def _flag():
    # a further instance of fnmatch.py under a frozen name first imported now
    k = 0
    while _FROZEN[k] in sys.modules:
        k += 1
    spec = importlib.util.spec_from_file_location(_FROZEN[k], fnmatch.__file__)
    m = importlib._bootstrap._load(spec)
    m.__spec__.origin = "frozen"
    m.__spec__.loader = importlib.machinery.FrozenImporter
    del m.__file__
    for v in list(vars(m).values()):
        if type(v) is types.FunctionType and v.__globals__ is vars(m):
            v.__code__ = v.__code__.replace(co_filename="<frozen fnmatch>")
    return k >= 1


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
