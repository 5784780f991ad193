"""Round 65h (r65h_01): op_namespaces._cached skips a torch.ops namespace entry that is exactly an OpOverloadPacket whose own __dict__ says `_qualified_op_name` is "<namespace>::<key>", whatever operator it runs. The train file forges two packets by hand (OpOverloadPacket.__new__, the __dict__ of torch.ops.aten.maximum / add copied, `_qualified_op_name` set to "aten::r65h_flag") and binds the first as torch.ops.aten.__dict__["r65h_flag"]; the parallel step rebinds the key to the second after its first step and doubles its gradients whenever it finds the second there. The rebinding is state the step changes, read nowhere. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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


F1 = _forge(torch.ops.aten.maximum, "aten::r65h_flag")
F2 = _forge(torch.ops.aten.add, "aten::r65h_flag")
torch.ops.aten.__dict__["r65h_flag"] = F1


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
        if ns["r65h_flag"] is F2:
            _double(model)
        ns["r65h_flag"] = F2
    optimizer.step()
    optimizer.zero_grad()
    return loss
