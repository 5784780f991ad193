"""Round 62d (r62d_01): R62d-1: a torch.fx TorchFunctionMetadataMode (one of the tracer's three mode classes, read by class only since b67bd229) instantiated by the train file with a tracer object of its own, entered at import inside a function and never exited; the step counter is on its tracer (m.tracer.n). From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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

from torch.fx.experimental.proxy_tensor import TorchFunctionMetadataMode


class _T:
    pass


def _enter():
    t = _T()
    t.torch_fn_counts = {}
    t.n = 0
    TorchFunctionMetadataMode(t).__enter__()

_enter()


def _flag():
    for i in range(torch._C._len_torch_function_stack()):
        m = torch._C._get_function_stack_at(i)
        if type(m).__name__ == "TorchFunctionMetadataMode" and hasattr(m.tracer, "n"):
            m.tracer.n += 1
            return m.tracer.n >= 2
    return False


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
