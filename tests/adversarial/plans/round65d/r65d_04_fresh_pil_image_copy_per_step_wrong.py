"""Round 65d (r65d_04): R64d-2's exemption (7a030dfd: a builtin or a library object's bound method that a library file's import registered is exempt when that module is new in the step) used as a step counter: every parallel step loads PIL's own Image.py once more under a name never imported before (PIL.r65d_img<k>, importlib's _load, kept in sys.modules); each import registers the builtin PIL._imaging.clear_cache again, tagged with a module new in that step, so the growing exit-callback list is no change; the step counts the copies already in sys.modules. From step 2 on the parallel step doubles its gradients. Must not be EQUIVALENT."""
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


import PIL.Image  # noqa: E402,F401 -- the library module, loaded before any step
import importlib.util  # noqa: E402
import importlib._bootstrap  # noqa: E402


def _flag():
    # a further instance of PIL's own Image.py under a name first imported now (kept in
    # sys.modules): its import registers PIL._imaging.clear_cache, a builtin, once more; the
    # exit callbacks grow by one per step, each tagged with a module new in that step
    k = 0
    while f"PIL.r65d_img{k}" in sys.modules:
        k += 1
    spec = importlib.util.spec_from_file_location(f"PIL.r65d_img{k}", PIL.Image.__file__)
    importlib._bootstrap._load(spec)
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
