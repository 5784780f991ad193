"""Idea: the import itself carries the state: the parallel step really imports `graphlib` (not
loaded in any process before), which `import_made` exempts as an import's; `forward` scales by
0.5 when `"graphlib" in sys.modules`: from step 2 on the ranks scale, the spec not.
Truth (torch4_truth.py FILE 2): step 1 5.6e-17 / 0; step 2 w1 0.0027 / w2 0.0051 (wrong).
Verdict (970c0c9): EQUIVALENT (4 goals, 43 s): false accept, R11-4's family (a module first
imported during the step is taken as its import leaves it; here the import itself is the state).
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


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        y = self.w2(nn.functional.silu(self.w1(x)))
        return y * 0.5 if "graphlib" in sys.modules else y


def _carry():
    importlib.import_module("graphlib")


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

