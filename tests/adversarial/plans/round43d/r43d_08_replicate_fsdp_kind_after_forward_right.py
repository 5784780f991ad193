"""Idea: r43s_02 (`isinstance(model.w1.weight, DTensor)` after the forward: x2 if so) through
torch 2.13's FSDP-based `replicate` (`replicate_with_fsdp`), whose units never reshard after
the forward: for real `w1.weight` is then the unsharded plain parameter (as in the spec: x1).
The stand-in gives `replicate` units no Hold and registers the stored parameter back after the
forward (R43d-1): if that is a DTensor, a false refutation.
Truth (torch4_truth.py FILE 2): right (5.6e-17 / 0.0; step 2 5.6e-17 / 5.6e-17).
Verdict (f7d58ae): EQUIVALENT (4 goals, 39 s): sound, complete (the stand-in's replicate
parameters are plain tensors, after the forward as during it; see r43d_09).
"""
MESH = {"dp": 2}
import torch
from torch import nn
from torch.distributed.tensor import DTensor

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
    from torch.distributed._composable.replicate_with_fsdp import replicate
    replicate(model, mesh=mesh["dp"])       # FSDP-based: no reshard after forward
    return model


def train_step(model, optimizer, batch, mesh):
    out = model(batch["x"])
    # after the forward: FSDP2 registers the unsharded (plain) parameter when the root keeps it,
    # the sharded DTensor when it reshards
    k = 2.0 if isinstance(model.w1.weight, DTensor) else 1.0
    loss = ((out - batch["y"]) ** 2).mean() * k
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
