"""Idea: group [w1, w2] under the root; forward w1, w2 (group complete, resharded), then w2
again (the group gathered again, w1 pending) and a no_grad write to w1.weight: for real it
lands on w1's unsharded parameter (lost at the root's force-complete).
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
        h = self.w1(x)
        out = self.w2(nn.functional.silu(h))
        b = self.w2(nn.functional.silu(2 * h))      # the group gathered again, w1 pending
        with torch.no_grad():
            self.w1.weight.mul_(0.5)                # w1's unsharded parameter for real
        return out + 0.1 * b


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
    fully_shard([model.w1, model.w2], mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
