"""Round 65g (r65g_01): op_namespaces.namespace_data skips an entry of a torch.ops namespace whose value is exactly an OpOverloadPacket / OpOverload (`_cached`: "what a namespace's __getattr__ caches"), whatever key it sits under and whichever operator it is. The train file binds torch.ops.aten.__dict__["r65g_flag"] = torch.ops.aten.maximum; the parallel step rebinds it to torch.ops.aten.add after its first step and doubles its gradients whenever it finds add there. The rebinding is state the step changes, read nowhere. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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

torch.ops.aten.__dict__["r65g_flag"] = torch.ops.aten.maximum


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
        if ns["r65g_flag"] is torch.ops.aten.add:
            _double(model)
        ns["r65g_flag"] = torch.ops.aten.add
    optimizer.step()
    optimizer.zero_grad()
    return loss
