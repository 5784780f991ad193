"""Idea: as r40b_03, but `MLP.__init__` asks `isinstance(self.cfg, Sharded)` first (the
answer is cached in the ABC: positive or negative cache; not read by `step_state`). If the
capture builds the model before its fake process group is up, the cached "no" decides the
plan's trace, while the real ranks (process group up before `build_model`) cache "yes".
Truth (torch4_truth.py FILE 2): as r40b_03 (step 1 0.0039 / 0.0048, step 2 0.0057 / 0.0077).
Verdict at 1510d44: NOT EQUIVALENT (4 goals refuted, 19 s): sound.
"""
MESH = {"dp": 2}
import abc

import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Sharded(abc.ABC):
    @classmethod
    def __subclasshook__(cls, C):
        return dist.is_available() and dist.is_initialized()


class Cfg:
    width = 1


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)
        self.cfg = Cfg()
        isinstance(self.cfg, Sharded)     # answered (and cached) when the model is built

    def forward(self, x):
        y = self.w2(nn.functional.silu(self.w1(x)))
        return y * 0.5 if isinstance(self.cfg, Sharded) else y


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
    optimizer.step()
    optimizer.zero_grad()
    return loss
