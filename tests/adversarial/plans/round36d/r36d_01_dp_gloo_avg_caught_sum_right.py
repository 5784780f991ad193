"""Round 36d (dp 2, wrong): ReduceOp.AVG over the gloo duplicate of dp. Gloo has no AVG
("Cannot use ReduceOp.AVG with Gloo"): the real run raises; the train file catches it and falls
back to a SUM without dividing (a "portable" all-reduce). The capture makes the group on the
fake backend, whose AVG succeeds: the step is modelled as an average.

Truth (torch4_truth.py FILE 1, gloo): w1 5.6e-17, w2 0.0 (right: torch 2.13's gloo has
ReduceOp.AVG, the fallback never runs).
Verdict at 072d231: EQUIVALENT (23 s): sound.
"""

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
    _G["dp_gloo"] = dist.new_group(ranks=ranks, backend="gloo")
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        g = _G["dp_gloo"]
        for p in model.parameters():
            try:
                dist.all_reduce(p.grad, op=dist.ReduceOp.AVG, group=g)
            except (RuntimeError, ValueError):
                dist.all_reduce(p.grad, group=g)   # "the backend averages elsewhere"
    optimizer.step()
    optimizer.zero_grad()
    return loss
