"""Round 38a (dp 2, right): Megatron's gloo duplicate of the dp group made with
`backend=dist.Backend("gloo")` (an instance of torch's own `Backend`, a `str` subclass, as
torch's docs write it), the gradients all-reduced over it and divided: right.
`new_groups._builtin_backend` takes only `type(asked) is str`.
Truth (torch4_truth.py FILE 1): w1 6e-17, w2 0.0 (right).
Verdict (main 4d89de3): EQUIVALENT (48 s): no false refusal.
"""

import datetime

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
_G = {}


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
    ranks = list(range(dist.get_world_size()))
    _G["dp"] = dist.new_group(ranks=ranks)
    # Megatron's parallel_state: a gloo duplicate of the dp group, the backend as torch's enum
    _G["dp_gloo"] = dist.new_group(ranks=ranks, backend=dist.Backend("gloo"))
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        g = _G["dp_gloo"]
        for p in model.parameters():
            if g is not None:
                dist.all_reduce(p.grad, group=g)
                p.grad.div_(dist.get_world_size(group=g))
    optimizer.step()
    optimizer.zero_grad()
    return loss
