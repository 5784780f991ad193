"""Round 39a (dp 2, right): `offload_wrapper` (torch's `OffloadWrapper`, an `ActivationWrapper`
whose child is also `_checkpoint_wrapped_module`) around the block in `parallelize`.
Truth (torch4_truth.py FILE 1): w1 5.6e-17, w2 0 (right).
Verdict (main 6e50b4f): EQUIVALENT (53 s): right.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
import functools
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper)

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Base(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.inner = Base(h, f)

    def forward(self, x):
        return self.inner(x)


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import offload_wrapper
    model.inner = offload_wrapper(model.inner)
    return model


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
    optimizer.step()
    optimizer.zero_grad()
    return loss
