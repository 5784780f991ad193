"""Round 63c (r63c_05): torch's thread-local dispatch key sets are not read by the step-state fingerprint (their getter, torch._C._dispatch_tls_is_dispatch_key_excluded(key), takes an argument, so it is not among f6b296aa's zero-argument getters). torch._C._dispatch_tls_set_dispatch_key_excluded itself is refused from the train file (dispatch_escapes, R49e-1: v1 of this plan, exit 3), but torch._C._functorch.tls_set_vmap_excluded (functorch's, not an escape) excludes the FuncTorchBatched key the same way. The parallel step toggles it (no batched tensor here: no effect) and the flag is whether the key is excluded; parallelize puts it back. From the second step on the parallel run doubles its gradients. (v2 held the setter in a global `_SET`: UNKNOWN, an opaque pybind function in a global.) Must not be EQUIVALENT."""
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
_K = torch._C.DispatchKey.FuncTorchBatched


def _flag():
    v = torch._C._dispatch_tls_is_dispatch_key_excluded(_K)
    torch._C._functorch.tls_set_vmap_excluded(not v)
    return v

def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    H["on"] = True
    torch._C._functorch.tls_set_vmap_excluded(False)
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
