"""Idea (round 46d, R46c-1): the divide factor changed between two backwards of one step (factor 2, then 1
on both units, the second loss scaled 0.25 under FSDP2, 0.5 on one device): each post-backward reads its own
factor; the accumulated gradient is 1.5 g in both. Right plan."""
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
    sharded = hasattr(model.w2, "set_gradient_divide_factor")
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()                          # factor 2: the mean g
    if sharded:
        model.w2.set_gradient_divide_factor(1.0)
        model.set_gradient_divide_factor(1.0)
    loss2 = ((model(x) - y) ** 2).mean() * (0.25 if sharded else 0.5)
    loss2.backward()                         # the sum of 0.25 g_r = 0.5 g (one device 0.5 g)
    if sharded:
        model.w2.set_gradient_divide_factor(2.0)
        model.set_gradient_divide_factor(2.0)
    optimizer.step()
    optimizer.zero_grad()
    return loss
