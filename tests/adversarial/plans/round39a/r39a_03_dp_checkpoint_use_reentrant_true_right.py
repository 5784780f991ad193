"""Round 39a (dp 2, right): `torch.utils.checkpoint.checkpoint(self.inner, self.pre(x),
use_reentrant=True)` after a plain layer (its input needs a gradient) in `forward` (the older
default; an autograd.Function re-running the block in its backward).
Truth (torch4_truth.py FILE 1): pre 2.8e-17, inner.w1 0, inner.w2 6.9e-18 (right).
Verdict (main 6e50b4f): EQUIVALENT (6 goals, 60 s): right.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
import functools
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper)

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Base(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.pre = nn.Linear(h, h, bias=False)
        self.inner = Base(h, f)

    def forward(self, x):
        return torch.utils.checkpoint.checkpoint(self.inner, self.pre(x), use_reentrant=True)


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
