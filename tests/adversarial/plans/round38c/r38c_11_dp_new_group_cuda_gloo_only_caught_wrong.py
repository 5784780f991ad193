"""Round 38c (dp 2, wrong): R38a-5's fix (`_builtin_backend`: "dev:gloo" pairs with distinct
devices) takes `backend="cuda:gloo"` as torch's gloo and drops it: the capture's group has every
device. The real group has a gloo backend for cuda only: `all_reduce` of a CPU gradient raises
RuntimeError ("No backend type associated with device type cpu"), which the step catches
(a "CPU-side collectives off" fallback): no all-reduce in the real run. Nothing raises in the
capture, so caught.py records nothing.
Truth (torch4_truth.py FILE 1): w1 0.0088, w2 0.018 (wrong: no all-reduce in the real run).
Verdict (wip/r38 18debf8): **EQUIVALENT** (68 s): false accept R38c-4.
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
    # a gloo duplicate of the dp group, meant for the devices named
    _G["dp_gloo"] = dist.new_group(ranks=ranks, backend="cuda:gloo")
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        g = _G["dp_gloo"]
        for p in model.parameters():
            try:
                dist.all_reduce(p.grad, group=g)
                p.grad.div_(dist.get_world_size(group=g))
            except RuntimeError:   # WRONG: the real run raises here, the capture does not
                pass
    optimizer.step()
    optimizer.zero_grad()
    return loss
