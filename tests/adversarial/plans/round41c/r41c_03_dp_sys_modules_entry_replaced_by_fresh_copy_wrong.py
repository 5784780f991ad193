"""Idea: a `sys.modules` entry replaced (same key, new module). The parallel step executes a fresh
copy of the loaded `json` module from its real spec (`module_from_spec` + `exec_module`: same
source, same globals' text) and puts it under `"json"`. The train file kept the original
(`import json as _JSON` at import); `forward` scales by 0.5 when `sys.modules["json"] is not
_JSON`: from step 2 on the ranks scale, the spec not.
Truth (torch4_truth.py FILE 2): step 1 5.6e-17 / 0; step 2 w1 0.0027 / w2 0.0051 (wrong).
Verdict (970c0c9): UNKNOWN (35 s): 'torch namespace torch._dynamo.exc leaves the step as ... in
the parallel step' (torch's code names json: the replaced module is read through it): sound, by
luck (r41c_09 without it).
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
import json as _JSON


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        y = self.w2(nn.functional.silu(self.w1(x)))
        return y * 0.5 if sys.modules.get("json") is not _JSON else y


def _carry():
    spec = importlib.util.find_spec("json")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    sys.modules["json"] = m


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

