"""Round 37a (dp 2, wrong): R36d-1's timeout route after faf97b6 (`new_groups.
_raises_in_real_run` refuses only `timeout < timedelta(0)`): `timeout=datetime.timedelta.max`
("no timeout", a natural way to write it) is positive in Python, but gloo's context converts
it and sees a negative count ("timeout.count() >= 0. Invalid timeout", measured in a one-rank
gloo world); the fake backend ignores it. Caught, the real run goes without the gloo group
(no gradient all-reduce).
Truth (torch4_truth.py FILE 1): w1 0.0088, w2 0.018 (wrong: gloo raised, caught; no all-reduce).
Verdict at faf97b6: exit 3 (53 s): sound (the capture's group construction raised the same gloo
error: "dist.new_group raised in the capture's fake world (... timeout.count() >= 0 ...)").
With R37a-5 worked around (a scratch copy whose `_tampered` ignores the capture's own
patches): **EQUIVALENT** (4 goals, 62 s): false accept R37a-6 (latent).
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
    # Megatron's parallel_state: a gloo duplicate of the dp group (for CPU-side collectives)
    try:
        _G["dp_gloo"] = dist.new_group(ranks=ranks, backend="gloo",
                                       timeout=datetime.timedelta.max)
    except RuntimeError:   # "no gloo here: CPU-side collectives off"
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
