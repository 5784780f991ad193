"""Idea: fully_shard(model.w2) with set_reshard_after_backward(False) (its input needs grad:
RegisterPostBackward fires, but does not reshard). After loss.backward() the real w2 keeps its
unsharded parameter registered: 'model.w2.weight is p2' is False for real, True in the spec.
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
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    model.w2.set_reshard_after_backward(False)
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    p2 = optimizer.param_groups[0]["params"][1]
    out = model(x)
    loss = ((out - y) ** 2).mean()
    loss.backward()
    k = 1.0 if model.w2.weight is p2 else 2.0
    with torch.no_grad():
        for p in optimizer.param_groups[0]["params"]:
            p.grad.mul_(k)
    optimizer.step()
    optimizer.zero_grad()
    return loss
