"""Idea (round 46e): root.set_reshard_after_backward(False, recurse=False): the root state only; the group
[w1, w2] reshards. Doubling when w0 is unsharded and w2 a DTensor: wrong for real."""
MESH = {"dp": 2}
import copy
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


def _double(model):
    with torch.no_grad():
        for p in model.parameters():
            p.grad.mul_(2.0)
def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard([model.w1, model.w2], mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    sharded = hasattr(model, "set_reshard_after_backward")
    if sharded:
        model.set_reshard_after_backward(False, recurse=False)
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if sharded:
        flag = not isinstance(model.w0.weight, DTensor) and isinstance(model.w2.weight, DTensor)
        model.reshard()
        if flag:
            _double(model)
        model.set_reshard_after_backward(True, recurse=False)
    optimizer.step()
    optimizer.zero_grad()
    return loss
