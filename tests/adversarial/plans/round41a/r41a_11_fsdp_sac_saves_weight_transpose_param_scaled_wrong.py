"""Round 41a (dp 2, wrong): SAC under FSDP2 (the wrapped block its own unit, then the root) with a
policy that saves ``aten.t`` (the gathered weight's transpose, an alias of FSDP2's unsharded
parameter storage) and recomputes everything else; the step doubles ``w1`` (``no_grad``)
between the forward and the backward. The spec's ``mm`` does not save ``w1`` (the batch needs no
gradient), so its backward uses the forward's activations. In the real run FSDP2 frees the
unsharded storage after the forward and all-gathers the doubled ``w1`` into it for the backward:
SAC's cached transpose, a view of that storage, then reads the new ``w1`` (or SAC's version check
raises); the traced cache holds the forward's gathered value.
Truth: step 1 w1 0.0018, w2 0.013; step 2 0.0045 / 0.034 (wrong; the same as r41a_12's full AC:
the cached transpose reads the re-gathered, doubled w1).
Verdict (ec31448): **EQUIVALENT** (4 goals, 133 s): false accept **R41a-1**.
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
        _w1(model).mul_(2.0)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
