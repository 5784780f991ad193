"""Idea: a forward in `parallelize` (a shape check under `no_grad`, after `fully_shard`), then a
scaled init of `model.parameters()`. FSDP2's root (`model`) keeps its unsharded parameters
registered after that forward (no backward follows): `model.parameters()` are the root's
unsharded `w1`, the sharded `w2` (a non-root unit resharded); the scale writes the unsharded
`w1` (lost at the first backward's reshard, but step 1's forward runs on it) and the sharded
`w2`. The single-device model scales both for good. Does the stand-in see the parallelize
forward at all (HOLDS lives in the step)?
Truth (torch4_truth.py FILE 2): step 1 w1 0.0070 / w2 0.159 (wrong; w2 too: the spec model
never runs `parallelize`, so the init scale is in one run only).
Verdict (8a4a979): EQUIVALENT (4 goals, 26 s): the documented open limit R39c-1
(`parallelize` changing values), not a new finding; r43e_07 isolates the held-view part.
"""
import torch
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


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
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    with torch.no_grad():
        model(torch.zeros(1, model.w1.in_features))     # a shape check
        for p in model.parameters():                    # then a scaled init
            p.mul_(0.5)
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
