"""Idea: group [w1, w2]; after the group completes, a no_grad write to w1.weight (stored,
kept), then w1 again: right.
Expected right; truth (torch4_truth.py FILE 2): WRONG, step 1 w1 5.9e-4 / w2 4.1e-5, step 2
6.2e-4 (cause not analysed). Verdict (9d7244f): exit 3 (17 s, "written in place between its
all-gather for the forward and the backward"): sound.
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
        with torch.no_grad():
            self.w1.weight.mul_(0.5)
        b = self.w1(2 * x)
        return out + 0.1 * (b ** 2).mean()


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
