"""Round 39b, false-accept probe (dp 2, wrong). The DDP-style all-reduce hook is registered
in ``parallelize`` (so it runs in the first step) and removed inside train_step after the
backward: the parameters' hook dicts go from one hook to empty (read as None since d3f231b);
from step 2 on no gradient is all-reduced.
Truth (2 steps): step 1 5.6e-17 / 0.0, step 2 w1 0.0066 / w2 0.0124 (wrong).
Verdict at a90b464: exit 3 (15 s), "parameter 'w1.weight' has a gradient hook (_reduce ...)
registered before train_step" (param_hooks; sound)."""

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


HANDLES = []


def _reduce(p):
    dist.all_reduce(p.grad)
    p.grad.div_(dist.get_world_size())


def parallelize(model, mesh):
    HANDLES.extend(p.register_post_accumulate_grad_hook(_reduce) for p in model.parameters())
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    while HANDLES:
        HANDLES.pop().remove()
    optimizer.step()
    optimizer.zero_grad()
    return loss
