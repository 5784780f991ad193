"""Round 37a (dp 2, wrong): R36d-1 (r36d_03) with the environment set when the train file is
imported. faf97b6 compares the backend's environment at a `new_group` with the one when the
capture's fake world is made, which is after the import; the real run's world is made by the
launcher before it. `GLOO_SOCKET_IFNAME` set at import (to an interface this host lacks; only
when launched, `RANK` set: the capture sets the launcher's variables before the import too)
makes the real run's `new_group(ranks, backend="gloo")` raise; caught: no gradient all-reduce.
In the capture the variable is part of the "launch" environment, and the fake group is made.
Truth (torch4_truth.py FILE 1): w1 0.0088, w2 0.018 (wrong: gloo raised, caught; no all-reduce).
Verdict at faf97b6: exit 3 (54 s): "dist.new_group raised in the capture's fake world
(... gloo/transport/tcp/device.cc:84 ... Unable to find address for: shardproof_no_such_if0)":
sound, but only by R37a-5 (the capture made a real gloo group, as `_tampered()` is always
True, and it read the variable); once R37a-5 is fixed this is a false accept (the environment
baseline is taken after the import).
With R37a-5 worked around (a scratch copy whose `_tampered` ignores the capture's own
patches): **EQUIVALENT** (4 goals, 70 s): false accept R37a-7 (latent).
"""

import os

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
_G = {}

# the cluster's network interface for gloo, set when launched (torchrun sets RANK); this host
# has no such interface: every gloo group made after the import fails in the real run
if "RANK" in os.environ:
    os.environ["GLOO_SOCKET_IFNAME"] = "shardproof_no_such_if0"


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
    # a gloo group for the gradient all-reduce; "no gloo here: go without"
    try:
        _G["dp_gloo"] = dist.new_group(ranks=ranks, backend="gloo")
    except RuntimeError:
        _G["dp_gloo"] = None
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
