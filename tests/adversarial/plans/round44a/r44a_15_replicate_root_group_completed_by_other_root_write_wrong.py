"""Idea: r44a_14's layout; a no_grad write to body[0].weight (the pending member; not saved for backward) after model(x), before backward: for
real it lands on c's unsharded parameter (the group was left open), dropped at the reshard.
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
        self.body = nn.Sequential(nn.Linear(h, f, bias=False), nn.SiLU())
        self.c = nn.Linear(f, f, bias=False)
        self.head = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.head(nn.functional.silu(self.c(self.body(x))))


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
    from torch.distributed._composable.replicate_with_fsdp import replicate
    fully_shard([model.body[0], model.c], mesh=mesh["dp"])   # one state; c outside body
    fully_shard(model.body, mesh=mesh["dp"])                 # its root (runs first)
    replicate(model, mesh=mesh["dp"])                        # FSDP-based: sees replicate only
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    out = model(x)
    with torch.no_grad():
        model.body[0].weight.mul_(0.5)
    loss = ((out - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
