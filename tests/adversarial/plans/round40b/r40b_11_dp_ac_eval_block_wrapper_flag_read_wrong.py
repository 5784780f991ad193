"""Idea: R39a-5's setting (a block in eval mode before `apply_activation_checkpointing`: the
wrapper in training mode, its block not) with user code that reads the wrapper's flag:
`forward` doubles its output unless `self.inner.training` (the block, False, on one device;
the wrapper, True, on the ranks). Nothing changes a flag; the difference is in every step.
Truth (torch4_truth.py FILE 2): step 1 0.016 / 0.015, step 2 0.025 / 0.024 (wrong).
Verdict at 1510d44: NOT EQUIVALENT (4 goals refuted, 32 s): sound.
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
        y = self.inner(x)
        return y if self.inner.training else y * 2.0     # the flag of what model.inner is


def build_model(s):
    model = MLP(s["hidden"], s["ffn"])
    model.inner.eval()          # a block kept in eval mode (r39a_14)
    return model


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    apply_activation_checkpointing(
        model, checkpoint_wrapper_fn=functools.partial(checkpoint_wrapper,
                                                       checkpoint_impl=CheckpointImpl.NO_REENTRANT),
        check_fn=lambda m: isinstance(m, Base))
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
