"""Activation checkpointing then FSDP2 without resharding after forward; the step also runs
the wrapped block directly, outside the unit's forward and outside the backward, and adds
its output to the loss: FSDP2 does not gather (or reduce) for that call, so prove must not
say EQUIVALENT (a refusal is right).
Correction (S42-1's fix): FSDP2 keeps the unit's unsharded parameters registered after its
forward (``reshard_after_forward=False``), so the direct call uses them and its gradient is
reduced with the forward's: truth right (2 steps: 1.7e-18 / 2.2e-19). Exit 3 before the fix
(a false refusal); EQUIVALENT since (4 goals, 24 s)."""
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
    from torch.distributed.fsdp import fully_shard
    apply_activation_checkpointing(
        model, checkpoint_wrapper_fn=functools.partial(checkpoint_wrapper,
                                                       checkpoint_impl=CheckpointImpl.NO_REENTRANT),
        check_fn=lambda m: isinstance(m, Base))
    fully_shard(model.inner, mesh=mesh["dp"], reshard_after_forward=False)
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    block = model.inner._checkpoint_wrapped_module if mesh is not None else model.inner
    loss = loss + block(batch["x"]).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
