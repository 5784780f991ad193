"""Idea: r43d_08 with the kind read before the forward: torch 2.13's FSDP-based `replicate`
registers its parameters as DTensors (Replicate) outside the forward (`FSDPParam`'s sharded
parameter over a replicate-only mesh); the single-device spec's are plain tensors. x2 if a
DTensor: for real x2, in the spec x1. If the stand-in keeps `replicate`'s stored parameters
plain (r43d_08 proved EQUIVALENT, so after the forward they are not DTensors), a false accept.
Truth (torch4_truth.py FILE 2): step 1 w1 0.0070 / w2 0.0093 (wrong: x2 for real).
Verdict (f7d58ae): EQUIVALENT (4 goals, 44 s): R43d-7, a false accept (the stand-in's
`replicate` parameters are plain tensors; torch 2.13's FSDP-based ones are DTensors).
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
    k = 2.0 if isinstance(model.w1.weight, DTensor) else 1.0
    out = model(batch["x"])
    # after the forward: FSDP2 registers the unsharded (plain) parameter when the root keeps it,
    # the sharded DTensor when it reshards
    loss = ((out - batch["y"]) ** 2).mean() * k
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
