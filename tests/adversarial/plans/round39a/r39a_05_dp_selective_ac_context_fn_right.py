"""Round 39a (dp 2, right): selective activation checkpointing (torchtitan's op-level SAC):
`checkpoint(self.inner, x, use_reentrant=False, context_fn=...)` with
`create_selective_checkpoint_contexts` saving `aten.mm` outputs.
Truth (torch4_truth.py FILE 1): w1 5.6e-17, w2 0 (right).
Verdict (main 6e50b4f): EQUIVALENT (67 s): right.
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
        from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

        def policy(ctx, op, *args, **kwargs):
            if op == torch.ops.aten.mm.default:
                return CheckpointPolicy.MUST_SAVE
            return CheckpointPolicy.PREFER_RECOMPUTE
        return torch.utils.checkpoint.checkpoint(
            self.inner, x, use_reentrant=False,
            context_fn=functools.partial(create_selective_checkpoint_contexts, policy))


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
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
