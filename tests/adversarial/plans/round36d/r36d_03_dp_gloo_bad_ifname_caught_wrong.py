"""Round 36d (dp 2, wrong): the train file sets GLOO_SOCKET_IFNAME to an interface that does
not exist before new_group(ranks, backend="gloo"). torch's ProcessGroupGloo reads it in the
real run and raises; the train file catches that and goes without the gloo group (no gradient
all-reduce). The capture drops backend="gloo" (the fake backend reads no environment): the
group is made and taken as dp.

Truth (torch4_truth.py FILE 1, gloo): w1 0.0088, w2 0.018 (wrong: no gradient all-reduce).
Verdict at 072d231: EQUIVALENT (26 s): false accept R36d-1.
"""

import os

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
    # Megatron's parallel_state: a gloo duplicate of the dp group (for CPU-side collectives)
    os.environ["GLOO_SOCKET_IFNAME"] = "shardproof_no_such_if0"
    try:
        _G["dp_gloo"] = dist.new_group(ranks=ranks, backend="gloo")
    except Exception:   # noqa: BLE001 -- "no gloo here: CPU-side collectives off"
        _G["dp_gloo"] = None
    finally:
        os.environ.pop("GLOO_SOCKET_IFNAME", None)
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
