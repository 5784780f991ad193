"""Idea (round 46e): fully_shard(blk.inner), fully_shard([blk, w2]), root. model.w2.set_reshard_after_backward(False)
(recurse over w2 only) sets the group's (blk's own lin too), not inner's: for real blk.lin.weight is unsharded and
blk.inner.weight a DTensor after the backward; doubling then: wrong."""
MESH = {"dp": 2}
import torch
from torch import nn
from torch.distributed.tensor import DTensor

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Blk(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.inner = nn.Linear(h, h, bias=False)
        self.lin = nn.Linear(h, f, bias=False)

    def forward(self, x):
        return self.lin(torch.tanh(self.inner(x)))


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w0 = nn.Linear(h, h, bias=False)
        self.blk = Blk(h, f)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.blk(torch.tanh(self.w0(x)))))


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def _double(model):
    with torch.no_grad():
        for p in model.parameters():
            p.grad.mul_(2.0)

def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.blk.inner, mesh=mesh["dp"])
    fully_shard([model.blk, model.w2], mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    sharded = hasattr(model.w2, "set_reshard_after_backward")
    if sharded:
        model.w2.set_reshard_after_backward(False)
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if sharded:
        flag = (not isinstance(model.blk.lin.weight, DTensor)
                and isinstance(model.blk.inner.weight, DTensor))
        model.blk.reshard()
        if flag:
            _double(model)
        model.w2.set_reshard_after_backward(True)
    optimizer.step()
    optimizer.zero_grad()
    return loss
