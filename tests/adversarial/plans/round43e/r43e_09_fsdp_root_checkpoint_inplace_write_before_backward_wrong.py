"""Idea: r43e_08 with the decay written in place on the stored shards (`p.mul_(0.5)`, a version
bump) instead of through `.data`: does `gathered_then_written` refuse it (the control of
R43e-4)?
Truth (torch4_truth.py FILE 2): step 1 w1 3.9e-3 / w2 5.6e-3 (wrong, as r43e_08).
Verdict (8a4a979): exit 3 (9 s, `gathered_then_written`): sound; its message says FSDP2 gathers
again for the backward, which a root does not (as r43d_07's at f7d58ae).
"""

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def inner(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))

    def forward(self, x):
        return checkpoint(self.inner, x, use_reentrant=False)


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model, mesh=mesh["dp"])     # the root: keeps its unsharded parameters
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    with torch.no_grad():                   # a decay (in place) before the backward
        for p in optimizer.param_groups[0]["params"]:
            p.mul_(0.5)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
