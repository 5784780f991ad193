"""Round 39b, false-accept probe (dp 2, wrong), not using d3f231b: ``parallelize`` assigns
``w1.weight._backward_hooks = ATTACHED`` (a global ``{}``: empty, so no hook "registered
before train_step"); the step fills ``HOOKS`` (another global ``{}``) with a doubling hook
around its backward and empties it, then, in the parallel run, rebinds ``HOOKS = ATTACHED``.
Both globals read ``{}`` before and after, the parameter's entry the same empty dict. From
step 2 on the doubling hook goes into the parameter's dict: ``w1.weight``'s gradient doubled.
Truth (2 steps): step 1 5.6e-17 / 0.0, step 2 w1 0.0051 / w2 5.6e-17 (wrong).
Verdict at a90b464: EQUIVALENT (4 goals, 76 s): R39b-4 (older than d3f231b by reading: the
parameter's dict is the same empty dict before and after; not run at 6ff2d9e)."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}

HOOKS = {}
ATTACHED = {}


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
    model.w1.weight._backward_hooks = ATTACHED
    return model


def _double(g):
    return g * 2.0


def train_step(model, optimizer, batch, mesh):
    global HOOKS
    HOOKS[0] = _double
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    HOOKS.pop(0)
    if mesh is not None:
        HOOKS = ATTACHED
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
