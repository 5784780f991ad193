"""Idea (round 48b): forward 1, a .data write of the root's w0 (the root is not resharded after forward: FSDP2 keeps its params unsharded until the backward), forward 2, one backward: real forward 2 reads the stale unsharded w0; the stand-in refills."""
MESH = {"dp": 2}
import torch
from torch import nn

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


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w1, mesh=mesh["dp"], reshard_after_forward=True)
    fully_shard(model.w2, mesh=mesh["dp"], reshard_after_forward=True)
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss1 = ((model(x) - y) ** 2).mean()
    model.w0.weight.data.mul_(0.5)
    loss2 = ((model(x) - y) ** 2).mean()
    (loss1 + loss2).backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss2
