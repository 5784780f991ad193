"""Idea (round 46d): fully_shard([w1, w2]) is ONE FSDP2 state: set_gradient_divide_factor on member w1 sets the
factor of the whole param group (w2 too). Factor 1 (sum) set via model.w1, only w1's gradient halved after:
for real w2 is doubled. Wrong plan (the stand-in gives each member its own factor)."""
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
    sharded = hasattr(model.w1, "set_gradient_divide_factor")
    if sharded:
        model.w1.set_gradient_divide_factor(1.0)
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if sharded:
        with torch.no_grad():
            model.w1.weight.grad.mul_(0.5)
    optimizer.step()
    optimizer.zero_grad()
    return loss
