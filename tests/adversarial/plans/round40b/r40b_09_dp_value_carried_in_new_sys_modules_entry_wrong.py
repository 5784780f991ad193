"""Idea (control for r40b_08, no ABC): `state_changes` does not count a module added to
`sys.modules` during the step (torch imports lazily). The parallel step puts a module object
holding `scale = 0.5` into `sys.modules` by hand; `forward` multiplies by
`getattr(sys.modules.get("_r40b_scale"), "scale", 1.0)`: 0.5 on the ranks from step 2 on.
Truth (torch4_truth.py FILE 2): step 1 5.6e-17 / 0, step 2 w1 0.0027 / w2 0.0051.
Verdict at 1510d44: EQUIVALENT (4 goals, 35 s): false accept R40b-5.
"""
MESH = {"dp": 2}
import sys
import types

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
        return y * getattr(sys.modules.get("_r40b_scale"), "scale", 1.0)


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
        m = types.ModuleType("_r40b_scale")
        m.scale = 0.5
        sys.modules["_r40b_scale"] = m
    optimizer.step()
    optimizer.zero_grad()
    return loss
