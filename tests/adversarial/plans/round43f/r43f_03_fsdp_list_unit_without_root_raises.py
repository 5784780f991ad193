"""Idea: torchtitan's grouping `fully_shard([model.w1, model.w2])` without the outer
`fully_shard(model)`: the group is the first (and only) FSDP2 state to run forward, so it is a
root, and torch 2.13 `FSDPState._lazy_init` raises "FSDP requires a single root module but got
[...]" on every rank. The stand-in splits the list into one unit per module (`dataparallel.
fully_shard`), so `_decide_root` sees two single-module roots.
Truth (torch4_truth.py FILE 2): every rank raises at the first forward ("FSDP requires a
single root module but got (FSDPLinear(...), FSDPLinear(...))").
Verdict (fe08bcb): EQUIVALENT (4 goals, 58 s, machine loaded): R43f-1, a false accept.
"""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


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
    fully_shard([model.w1, model.w2], mesh=mesh["dp"])     # one FSDP2 state, two modules
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
