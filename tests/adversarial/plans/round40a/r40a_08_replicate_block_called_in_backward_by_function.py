"""Round 40a (dp 2): r40a_07 under `replicate` (DDP) instead of FSDP2. `Tap` runs the
checkpointed block again in its backward with grad enabled and backpropagates a penalty through
it (a nested backward). `_recompute_hooks` gives the block its unit's all-reducing views there
(the model: the penalty's gradient all-reduced); DDP's reducer sees a second accumulation of
the block's gradients in one backward.
Truth (torch4_truth.py FILE 2): the real DDP run raises ("Expected to mark a variable ready only
once").
Verdict (main 05940a8): EQUIVALENT (6 goals, 39 s): false accept R40a-4.
"""
MESH = {"dp": 2}
import functools

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper)

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Tap(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, block):
        ctx.save_for_backward(x)
        ctx.block = block
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        blk = getattr(ctx.block, "_checkpoint_wrapped_module", ctx.block)
        with torch.enable_grad():
            pen = blk(x.detach()).pow(2).mean()
            torch.autograd.backward(pen)
        return g, None


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
        self.pre = nn.Linear(h, h, bias=False)
        self.inner = Base(h, f)

    def forward(self, x):
        return self.inner(Tap.apply(self.pre(x), self.inner))


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    apply_activation_checkpointing(
        model, checkpoint_wrapper_fn=functools.partial(checkpoint_wrapper,
                                                       checkpoint_impl=CheckpointImpl.NO_REENTRANT),
        check_fn=lambda m: isinstance(m, Base))
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
