"""Idea (r40b_05 without the global counter): the parallel step drops `Momentum`'s own caches
with `Momentum._abc_caches_clear()` (no `register` anywhere: `abc.get_cache_token()` stays),
so reading the cache token alone would not close R40b-3: from step 2 on the ranks ask the
hook again (momentum buffers exist: scale 0.5), the spec keeps its cached "no".
Truth (torch4_truth.py FILE 2): step 1 5.6e-17 / 0, step 2 w1 0.0027 / w2 0.0051.
Verdict at 1510d44: EQUIVALENT (6 goals, 62 s, under load): false accept R40b-3.
"""
MESH = {"dp": 2}
import abc

import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
OPTS = []


class Momentum(abc.ABC):
    @classmethod
    def __subclasshook__(cls, C):
        return bool(OPTS) and len(OPTS[0].state) > 0


class Cfg:
    width = 1


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)
        self.cfg = Cfg()

    def forward(self, x):
        y = self.w2(nn.functional.silu(self.w1(x)))
        return y * 0.5 if isinstance(self.cfg, Momentum) else y


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    OPTS[:] = [opt]
    return opt


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        Momentum._abc_caches_clear()     # its positive and negative caches only
    optimizer.step()
    optimizer.zero_grad()
    return loss
