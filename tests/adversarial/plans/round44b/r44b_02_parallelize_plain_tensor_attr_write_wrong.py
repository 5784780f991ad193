"""Idea: a plain tensor attribute (not a parameter, not a buffer) the forward reads; parallelize
writes it in place (model.scale.mul_(2)). The guard watches parameters and buffers only.
Truth: wrong 0.016. Verdict (ac24550): exit 3 (8 s, a plain tensor attribute is a non-fake
constant in the trace): sound.
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
        self.scale = torch.ones(h)      # a plain tensor attribute, not a buffer

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x))) * self.scale


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
    with torch.no_grad():
        model.scale.mul_(2.0)
    fully_shard(model.w1, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
