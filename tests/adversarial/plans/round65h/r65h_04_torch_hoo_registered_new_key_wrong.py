"""Round 65h (r65h_04): op_namespaces._cached skips an entry of a torch.ops namespace that is a HigherOrderOperator when torch._ops._higher_order_ops holds it under that key. A HigherOrderOperator the train file makes is refused (r65h_03, exit 3), so the parallel step takes torch's own torch.ops.higher_order.cond and registers it under a new key: torch._ops._higher_order_ops["r65h_flag"] = cond (a dict read by type) and torch.ops.higher_order.__dict__["r65h_flag"] = cond (skipped: the registry holds it there); it doubles its gradients whenever it finds that entry. The new entry is state the step changes, read nowhere. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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

import torch._higher_order_ops  # noqa: F401  (torch.ops.higher_order.cond)

COND = torch.ops.higher_order.cond


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
        ns = torch.ops.higher_order.__dict__
        if "r65h_flag" in ns:
            _double(model)
        torch._ops._higher_order_ops["r65h_flag"] = COND
        ns["r65h_flag"] = COND
    optimizer.step()
    optimizer.zero_grad()
    return loss
