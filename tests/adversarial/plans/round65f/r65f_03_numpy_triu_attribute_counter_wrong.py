"""Round 65f (r65f_03): (held, no finding) numpy.triu (numpy's own array-function dispatcher) held as a train-file global T; the step counts in its instance __dict__ (T.r65f_n): special_values reads it by name only, not its attributes (a property is read with them); held by process_state reading numpy's module globals (UNKNOWN). From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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

import numpy

T = numpy.triu
T.r65f_n = 0


def _flag():
    T.r65f_n += 1
    return T.r65f_n >= 2


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
