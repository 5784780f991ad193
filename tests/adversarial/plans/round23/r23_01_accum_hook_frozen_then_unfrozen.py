"""Round 23 (R6-8 bypass through requires_grad): parallelize registers a post-hook on each
parameter's AccumulateGrad node that doubles p.grad (as r6_17b), keeps the nodes in a module
attribute torch does not look at (functools), then freezes every parameter
(requires_grad_(False)); train_step unfreezes them before the forward (a no-op on the single-
device side). param_hooks.accumulator_hooks returns 0 for a parameter that does not require
grad, and the capture builds the fresh parameter frozen, so the hook is never seen; for real the
AccumulateGrad node (weakly cached by the parameter, kept alive by the user) survives
requires_grad toggling and doubles every gradient of the parallel step. Wrong: grads and
updates 2x."""

import functools

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
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
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    keep = []
    for p in model.parameters():
        acc = p.view_as(p).grad_fn.next_functions[0][0]
        acc.register_hook(_doubler(p))
        keep.append(acc)
        p.requires_grad_(False)        # the hook is no longer counted
    functools._shardproof_r23_01 = keep
    return model


def train_step(model, optimizer, batch, mesh):
    for p in model.parameters():
        p.requires_grad_(True)         # same node, same hook, for real
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss


def _doubler(p):
    def hook(grad_inputs, grad_outputs):
        p.grad.mul_(2.0)
    return hook
