"""Idea (round 48e): forward/backward, then model.w1.unshard() after w1's post-backward resharded it (registers the unit again, clears the freed mark), then a second forward/backward accumulating (the late gradient reaches the re-unsharded leaf and its post-backward reduces it): right plan."""
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


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w1, mesh=mesh["dp"])
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss1 = ((model(x) - y) ** 2).mean()
    loss1.backward()
    if hasattr(model.w1, "unshard"):
        model.w1.unshard()
    loss2 = 0.5 * ((torch.tanh(model(x)) - y) ** 2).mean()
    loss2.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss2
