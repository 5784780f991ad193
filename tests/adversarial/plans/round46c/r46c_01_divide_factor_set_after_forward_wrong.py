"""Idea (round 46c): FSDP2 reads a unit's gradient divide factor in its post-backward
(foreach_reduce), not at its forward's all-gather. w2's factor set to 1 (sum) after the forward,
before the backward, back to 2 after: for real w2's gradient is the SUM over ranks (doubled).
Wrong plan (a stand-in that fixes the factor at the gather computes the mean)."""
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
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    sharded = hasattr(model.w2, "set_gradient_divide_factor")
    if sharded:
        model.w2.set_gradient_divide_factor(1.0)    # after the forward: read at post-backward
    loss.backward()
    if sharded:
        model.w2.set_gradient_divide_factor(2.0)    # the default again (dp 2)
    optimizer.step()
    optimizer.zero_grad()
    return loss
