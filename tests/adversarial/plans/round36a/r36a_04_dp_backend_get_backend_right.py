"""Round 36a (dp 2, right): the dp group's copy made with backend=dist.get_backend() (the
world's own backend: "gloo" in the real run), used for the step's all-reduce. In the capture
dist.get_backend() is the fake world's "fake", which is not one of torch's backends
_builtin_backend knows: the group is no axis (false refusal if refused).

Truth (torch4_truth.py FILE 1, gloo): w1 5.6e-17, w2 0.0 (right).
Verdict at a88d2d1: UNKNOWN (exit 2, 60 s: "process group '2' is not one of the mesh's axes"):
false refusal R36a-3.
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
    _G["dp_gloo"] = dist.new_group(ranks=ranks, backend=dist.get_backend())
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
