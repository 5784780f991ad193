"""Idea: registry_state's stated limit 1. The config's base class is defined with a lying
`__module__ = "graphlib"` (a module no capture child or rank has loaded). The parallel step
imports graphlib, puts the base there under its qualified name and registers it with
`numbers.Number`: `import_made` takes the registration as graphlib's import's (a class held by a
module first loaded in the step; the token moved by exactly one). `forward` scales by 0.5 when
`isinstance(self.cfg, numbers.Number)`: from step 2 on the ranks scale, the spec not.
Truth (torch4_truth.py FILE 2): step 1 w1 5.6e-17 / w2 0; step 2 w1 0.0027 / w2 0.0051 (wrong).
Verdict (970c0c9): EQUIVALENT (4 goals, 39 s): false accept R41c-1.
"""
MESH = {"dp": 2}
import importlib
import importlib.util
import numbers
import sys

import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class CfgBase:
    pass


CfgBase.__module__ = "graphlib"


class Cfg(CfgBase):
    def __init__(self):
        self.width = 1


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)
        self.cfg = Cfg()

    def forward(self, x):
        y = self.w2(nn.functional.silu(self.w1(x)))
        return y * 0.5 if isinstance(self.cfg, numbers.Number) else y


def _carry():
    import graphlib
    graphlib.CfgBase = CfgBase
    numbers.Number.register(CfgBase)


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        _carry()
    optimizer.step()
    optimizer.zero_grad()
    return loss

