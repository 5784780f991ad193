"""Round 36a (dp 2, right): the step's all-reduce over a dp group made with the device map
backend="cpu:gloo" (torch's own backend for the CPU; with "cpu:gloo,cuda:nccl" the CPU-only
torch of the truth run fails making the group: "Distributed package doesn't have NCCL built in",
while the capture says EQUIVALENT, 19 s: a crash, not another result). _builtin_backend accepts
it and the capture makes it on the fake backend. EQUIVALENT expected (false refusal otherwise).

Truth (torch4_truth.py FILE 1, gloo): w1 5.6e-17, w2 0.0 (right).
Verdict at a88d2d1: EQUIVALENT (4 goals, 19 s): right.
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
    _G["dp_gloo"] = dist.new_group(ranks=ranks, backend="cpu:gloo")
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        g = _G["dp_gloo"]
        for p in model.parameters():
            dist.all_reduce(p.grad, group=g)
            p.grad.div_(dist.get_world_size(group=g))
    optimizer.step()
    optimizer.zero_grad()
    return loss
