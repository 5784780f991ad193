"""Idea: `fully_shard([model.w1, model.w2])` (one FSDP2 state over two modules, torchtitan's
grouping of norm and output) with no `fully_shard(model)` around it: the grouped state is the
first to run a forward, so it is the root, and torch 2.13's `FSDPState._lazy_init` raises
("FSDP requires a single root module"). The stand-in makes one unit per listed module; each
is a root of its own (`fsdp_hold.is_root`); the step runs.
Truth (torch4_truth.py FILE 2): every rank raises RuntimeError ("FSDP requires a single root
module but got (FSDPLinear(...), FSDPLinear(...))") in the first forward.
Verdict (f7d58ae): EQUIVALENT (4 goals, 43 s): R43d-6, a false accept (the real run fails).
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
    fully_shard([model.w1, model.w2], mesh=mesh["dp"])   # no root around the group
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
