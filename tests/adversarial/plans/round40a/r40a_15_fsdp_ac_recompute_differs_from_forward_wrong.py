"""Round 40a (dp 2, wrong): a recomputation that differs from the forward. The block's forward
reads a global scale; the step sets it to 2 between the forward and the backward (and back
after). The single-device run has no checkpointing (its backward uses the forward's values);
the plan's AC + FSDP2 recomputation in the backward sees the new scale.
Truth (torch4_truth.py FILE 2): step 1 w1 0.0018, w2 0.013; step 2 w1 0.0031, w2 0.014 (wrong).
Verdict (main 05940a8): NOT EQUIVALENT (4 goals, 4 refuted, 37 s): sound.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
import functools
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper)

SCALE = [1.0]
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Base(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x) * SCALE[0]))


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
    fully_shard(model.inner, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    SCALE[0] = 2.0
    loss.backward()
    SCALE[0] = 1.0
    optimizer.step()
    optimizer.zero_grad()
    return loss
