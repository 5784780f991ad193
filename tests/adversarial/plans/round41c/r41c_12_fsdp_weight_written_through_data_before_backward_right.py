"""Idea: false-refusal side of R41a-1's check and its `.data` gap (r41c_05) without AC: FSDP2 with
`w2` its own unit, then the root; the step writes `w2.weight.data.mul_(2.0)` between the forward
and the backward (the version counter untouched, so nothing is refused). The spec's backward
reads the parameter itself (autograd saved `w2.weight`), so it sees the doubled weight; the real
FSDP2 run frees `w2`'s unsharded parameter after its forward and re-gathers the doubled shard
for the backward, so it sees it too: right. The capture's gather is a fresh tensor holding the
forward's value (a refutation of a right plan if it is used).
Truth (torch4_truth.py FILE 2): step 1 w1 6.9e-18 / w2 1.4e-17; step 2 5.6e-17 / 2.8e-17
(right).
Verdict (970c0c9): NOT EQUIVALENT (2 goals refuted, 58 s): a right plan refuted, R41c-6.
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
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    with torch.no_grad():
        model.w2.weight.data.mul_(2.0)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
