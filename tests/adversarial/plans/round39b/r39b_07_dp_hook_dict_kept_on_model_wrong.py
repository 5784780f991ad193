"""Round 39b, false-accept probe (dp 2, wrong): r39b_01 with the emptied hook dict kept on the
model (``model.hooks``, an empty ``OrderedDict`` from ``build_model``) instead of a global.
Truth (2 steps): step 1 5.6e-17 / 0.0, step 2 w1 0.0051 / w2 5.6e-17 (wrong).
Verdict at a90b464: EQUIVALENT (4 goals, 37 s): R39b-1."""

import collections

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
    m = MLP(s["hidden"], s["ffn"])
    m.hooks = collections.OrderedDict()
    return m


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def _double(p):
    p.grad.mul_(2.0)


def train_step(model, optimizer, batch, mesh):
    model.hooks[-1] = _double
    handles = []
    if mesh is not None:
        pg = mesh["dp"].get_group()

        def reduce(p):
            dist.all_reduce(p.grad, group=pg)
            p.grad.div_(mesh["dp"].size())

        handles = [p.register_post_accumulate_grad_hook(reduce) for p in model.parameters()]
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    for h in handles:
        h.remove()
    model.hooks.pop(-1)
    if mesh is not None:
        model.hooks = model.w1.weight._post_accumulate_grad_hooks
    optimizer.step()
    optimizer.zero_grad()
    return loss
