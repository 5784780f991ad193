"""Round 63b (r63b_06): a global module forward pre-hook's state. At import, inside a function, the train file registers a pass-through global forward pre-hook (torch.nn.modules.module.register_module_forward_pre_hook; it returns None, so it changes nothing the model computes) holding box = [0] in its own __dict__; the hook is held only by torch's module global _global_forward_pre_hooks (an OrderedDict, read by its type). The parallel step counts in the hook's box. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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
    def pre(mod, args):
        return None
    pre.box = [0]
    torch.nn.modules.module.register_module_forward_pre_hook(pre)


_mk()


def _flag():
    from torch.nn.modules import module as M
    h = next(iter(M._global_forward_pre_hooks.values()))
    h.box[0] += 1
    return h.box[0] > 1


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
