"""Round 30b: FSDP2 (``fully_shard`` per layer, dp = 2) on an MLP with a square
``nn.Linear(f, f)`` in a residual and applied twice (its Shard(0) is one of two twin dims).
Right: EQUIVALENT expected (and given)."""

import torch
from torch import nn
from torch.distributed.fsdp import fully_shard

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.sq = nn.Linear(f, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        a = nn.functional.silu(self.w1(x))
        a = a + self.sq(a)
        a = torch.tanh(self.sq(a))
        return self.w2(a)


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    dp = mesh["dp"]
    fully_shard(model.w1, mesh=dp)
    fully_shard(model.sq, mesh=dp)
    fully_shard(model.w2, mesh=dp)
    fully_shard(model, mesh=dp)
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
