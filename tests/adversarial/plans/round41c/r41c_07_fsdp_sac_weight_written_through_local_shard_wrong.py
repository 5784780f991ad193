"""Idea: R41a-1's check reads the DTensor parameter's own version (ca4df86: the local tensor's
counter is not bumped by an in-place op on the DTensor under make_fx). Writing the *local shard*
instead (`_w1(model).to_local().mul_(2.0)`, a view of FSDP2's sharded storage, the DTensor's
counter untouched): r41a_11 (FSDP2 + SAC saving `aten.t` of the gathered `w1`) with that write
between the forward and the backward.
Truth (torch4_truth.py FILE 2): step 1 w1 0.0018 / w2 0.013; step 2 0.0045 / 0.034 (wrong, as
r41a_11).
Verdict (970c0c9): EQUIVALENT (4 goals, 26 s): false accept R41c-4.
"""
MESH = {"dp": 2}
import functools

import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

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


def policy(ctx, op, *args, **kwargs):
    if op is torch.ops.aten.t.default:
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    model.inner = checkpoint_wrapper(
        model.inner, context_fn=functools.partial(create_selective_checkpoint_contexts, policy))
    fully_shard(model.inner, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def _w1(model):
    inner = model.inner
    return (inner._checkpoint_wrapped_module if hasattr(inner, "_checkpoint_wrapped_module")
            else inner).w1.weight


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    with torch.no_grad():
        w = _w1(model)
        (w.to_local() if hasattr(w, "to_local") else w).mul_(2.0)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
