"""Idea: the root decided in an eval: `fully_shard(w1)`, `fully_shard(w2)`, `fully_shard(model)`;
`train_step` first probes `model.w1` under `no_grad` (a feature-norm log), then runs the usual
step through `model`. FSDP2's `_lazy_init` makes `w1` a root at the probe; `model`'s first
forward then finds a state under it already initialized and raises on every rank ("FSDP state
has already been lazily initialized for w1 / FSDP requires running forward through the root
module first"). The stand-in's `_decide_root` makes `w1` a root and then `model` a second root
(a root under the new root is skipped, not refused) and runs.
Truth (torch4_truth.py FILE 2): every rank raises RuntimeError ("FSDP state has already been
lazily initialized for w1") at `model(x)` in step 1.
Verdict (8a4a979): EQUIVALENT (4 goals, 25 s): R43e-2, a false accept (the real run raises).
(With `.abs()` in the probe: UNKNOWN, `aten.abs` has no lowering rule.)
"""

import torch
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
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w1, mesh=mesh["dp"])
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    with torch.no_grad():                   # a feature-norm probe for the log
        probe = (model.w1(x) ** 2).mean()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss + 0.0 * probe
