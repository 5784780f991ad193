"""Round 39b, false-accept probe (dp 2, wrong). No hook is registered at all: the parallel step
sets ``w1.weight._backward_hooks`` by hand to a module-global empty dict (torch's C setter
installs a pre-hook that reads the dict on every backward), and every step puts a
gradient-doubling hook into that global and pops it before returning. In step 1 (the traced
one) the dict is attached only after the backward: nothing runs, and it is empty when the step
ends (the parameter's attribute reads as None since d3f231b, the global's text is "{}" before
and after). From step 2 on, in the parallel run only, ``w1.weight``'s gradient is doubled.
Truth (2 steps): step 1 5.6e-17 / 0.0, step 2 w1 0.0051 / w2 5.6e-17 (wrong).
Verdict at a90b464: EQUIVALENT (4 goals, 63 s): R39b-2.
At 6ff2d9e (d3f231b's parent): UNKNOWN step-state "the parallel step changes parameter
w1.weight attributes (to <dict ...>)" (24 s): d3f231b opened it."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}

HOOKS = {}


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
    return model


def _double(g):
    return g * 2.0


def train_step(model, optimizer, batch, mesh):
    HOOKS[0] = _double
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    HOOKS.pop(0)
    if mesh is not None:
        model.w1.weight._backward_hooks = HOOKS
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
