"""Idea (round 46d): set_reshard_after_backward(False) on member w1 of fully_shard([w1, w2]) sets the whole
param group's (w2 too): for real model.w2.weight is still the unsharded Parameter after the backward -> the plan
doubles the gradients: wrong. The stand-in records it on w1's unit only (w2 resharded: a DTensor)."""
MESH = {"dp": 2}
import torch
from torch import nn
from torch.distributed.tensor import DTensor

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w0 = nn.Linear(h, h, bias=False)
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(torch.tanh(self.w0(x)))))


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard([model.w1, model.w2], mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    sharded = hasattr(model.w1, "set_reshard_after_backward")
    if sharded:
        model.w1.set_reshard_after_backward(False)
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if sharded:
        flag = not isinstance(model.w2.weight, DTensor)
        model.w1.reshard()
        if flag:
            with torch.no_grad():
                for p in model.parameters():
                    p.grad.mul_(2.0)
        model.w1.set_reshard_after_backward(True)
    optimizer.step()
    optimizer.zero_grad()
    return loss
