"""Round 65h (r65h_02): as r65h_01, under a key torch itself fills: the parallel step replaces torch.ops.aten.__dict__["mul"] with a packet forged by hand whose `_qualified_op_name` is "aten::mul" (so op_namespaces._cached skips it) but whose op is aten::add (its __dict__ copied from torch.ops.aten.add), and doubles its gradients whenever it finds that forged packet there. torch.ops.aten.mul now runs add for anyone. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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

_OPP = torch._ops.OpOverloadPacket


def _forge(p, q):
    f = _OPP.__new__(_OPP)
    d = object.__getattribute__(f, "__dict__")
    d.update(object.__getattribute__(p, "__dict__"))
    d["_qualified_op_name"] = q
    return f


F2 = _forge(torch.ops.aten.add, "aten::mul")
torch.ops.aten.mul   # (the real packet cached under its name, as torch does on first use)


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
        ns = torch.ops.aten.__dict__
        if ns["mul"] is F2:
            _double(model)
        ns["mul"] = F2
    optimizer.step()
    optimizer.zero_grad()
    return loss
