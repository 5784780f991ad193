"""Idea: self-distillation under a holding root: a `no_grad` forward of the model gives the
target, then the grad forward on the same batch is trained towards it (plus the data loss).
For real the grad forward reuses the no_grad forward's unsharded parameters (the same values:
nothing wrote the shards in between); the stand-in gathers fresh views (`Hold.view`). Right:
the proof should not refuse or refute it.
Truth (torch4_truth.py FILE 2): right (2.8e-17 / 1.7e-18; step 2 2.8e-17 / 0.0).
Verdict (f7d58ae): EQUIVALENT (4 goals, 24 s): sound, complete.
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
    fully_shard(model, mesh=mesh["dp"])     # the root: reshard_after_forward None -> False
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    with torch.no_grad():                   # the teacher: the model itself, no autograd
        target = model(x)
    out = model(x)
    loss = ((out - y) ** 2).mean() + 0.5 * ((out - 0.9 * target) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
