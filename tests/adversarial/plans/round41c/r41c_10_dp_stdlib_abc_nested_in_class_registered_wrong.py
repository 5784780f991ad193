"""Idea: registry_state's stated limit 3, an ABC no module holds as a global, with a standard
library ABC: `importlib.resources._adapters.CompatibilityFiles.SpecPath` (an ABC nested in a
class; one of 8 such ABCs a capture child holds, found with `gc.get_objects()`). The parallel
step registers the model's config class with it; `forward` scales by 0.5 when
`isinstance(self.cfg, CompatibilityFiles.SpecPath)`: from step 2 on the ranks scale. Only the
user's own ABCs' registries are read by the encoder (R40b-3), the standard library's only as
module globals (R40b-2); the cache token moves (unexplained) unless something else hides it.
Truth (torch4_truth.py FILE 2): step 1 5.6e-17 / 0; step 2 w1 0.0027 / w2 0.0051 (wrong).
Verdict (970c0c9): UNKNOWN (27 s): 'cannot read the global CompatibilityFiles ... (!<holds
opaque builtins.property>)': sound, by luck (r41c_11 without the global).
"""
MESH = {"dp": 2}
import importlib
import importlib.util
import numbers
import sys
from importlib.resources._adapters import CompatibilityFiles

import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Cfg:
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
        return y * 0.5 if isinstance(self.cfg, CompatibilityFiles.SpecPath) else y


def _carry():
    CompatibilityFiles.SpecPath.register(Cfg)


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

