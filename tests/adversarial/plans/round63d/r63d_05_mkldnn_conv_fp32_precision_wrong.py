"""Round 63d (r63d_05): a torch setting whose getter takes arguments (R63c-1's family again: f104656c lists zero-argument getters and five setters answering the old value). The public attribute torch.backends.mkldnn.conv.fp32_precision (torch._C._set_fp32_precision_setter / _get_fp32_precision_getter("mkldnn", "conv")) is toggled between "none" and "tf32" by the parallel step (the MLP has no convolution: no effect), the flag being whether it differs from import; parallelize puts it back. Unread by the fingerprint. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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
_V0 = torch.backends.mkldnn.conv.fp32_precision


def _flag():
    v = torch.backends.mkldnn.conv.fp32_precision
    torch.backends.mkldnn.conv.fp32_precision = "tf32" if v == _V0 else _V0
    return v != _V0


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    H["on"] = True
    torch.backends.mkldnn.conv.fp32_precision = _V0
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
