"""Round 60d: R60c-2 again with the step's code compiled under a ``<frozen ...>`` file name:
297ba88's stack walk takes a frame for the train file's when its file name starts with ``<``
but not ``<frozen `` or lies under the train file's directory, so ``train_step`` and its
helper compiled as ``<frozen r60d>`` (``exec(compile(...))`` at import) call the front end's
``special_values.special_text`` with a stack of no train-file frame: the ``gc.get_referents``
call is unrecorded and the encoder receives the real dict of ``int``, where the step keeps a
counter. From the second step on the parallel run doubles its gradients. Must not be
EQUIVALENT."""
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

from spec_lang.torch_frontend import special_values as _sv


class _Enc:
    uncomparable = unreadable = False

    def enc(self, x):
        self.got = x
        return ""

    def _attrs(self, v):
        return ""


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    H["on"] = True
    replicate(model, device_mesh=mesh["dp"])
    return model


_STEP = """
def _flag():
    e = _Enc()
    _sv.special_text(e, int.__dict__)
    d = e.got
    n = d.get("r60d", 0)
    d["r60d"] = n + 1
    return n > 0


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
"""
exec(compile(_STEP, "<frozen r60d>", "exec"), globals())
