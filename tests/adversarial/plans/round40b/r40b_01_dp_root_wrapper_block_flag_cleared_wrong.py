"""Idea: torch's checkpoint wrapper at the *root* (`parallelize` returns
`checkpoint_wrapper(model)`). The plan's leftover entry for the wrapped root block is
`_checkpoint_wrapped_module.training`, which `state_dict_name` makes `training`, not the
spec's `<model>.training`; the wrapper's own flag (the plan's `<model>.training`) is left out
since R39a-5. So the root block's flag is compared with nothing, and step_state skips
`training` for every module but the wrapper. The parallel step clears the root block's flag
only (`model._checkpoint_wrapped_module.training = False`); `MLP.forward` doubles its output
when `self.training` is False: wrong from step 2.
Truth (torch4_truth.py FILE 2): step 1 5.6e-17 / 0, step 2 w1 0.011 / w2 0.014.
Verdict at 1510d44: EQUIVALENT (4 goals, 33 s): false accept R40b-1.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl, checkpoint_wrapper)

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        y = self.w2(nn.functional.silu(self.w1(x)))
        return y if self.training else y * 2.0


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return checkpoint_wrapper(model, checkpoint_impl=CheckpointImpl.NO_REENTRANT)


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        model._checkpoint_wrapped_module.training = False   # the root block's flag only
    optimizer.step()
    optimizer.zero_grad()
    return loss
