"""Idea: registry_state's stated limit 2. The parallel step makes a module by hand
(`types.ModuleType`), gives it a copy of a real file's spec (`importlib.util.find_spec(
"graphlib")`), sets `scale = 0.5` in it and puts it into `sys.modules` under a new key;
`import_origin` takes it as an import's (a loader, an existing origin). `forward` multiplies by
`sys.modules["_r41c_knobs"].scale` when the key is there: from step 2 on the ranks scale.
Truth (torch4_truth.py FILE 2): step 1 5.6e-17 / 0; step 2 w1 0.0027 / w2 0.0051 (wrong).
Verdict (970c0c9): EQUIVALENT (4 goals, 27 s): false accept R41c-2.
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
import types


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        y = self.w2(nn.functional.silu(self.w1(x)))
        knobs = sys.modules.get("_r41c_knobs")
        return y * knobs.scale if knobs is not None else y


def _carry():
    m = types.ModuleType("_r41c_knobs")
    m.__spec__ = importlib.util.find_spec("graphlib")
    m.__file__ = m.__spec__.origin
    m.scale = 0.5
    sys.modules["_r41c_knobs"] = m


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

