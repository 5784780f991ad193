"""Round 36a (dp 2, wrong): a validation torch runs on the backend asked for, skipped by the
capture because it drops the argument. torch's _new_group_with_tag raises ValueError for
backend="mpi" with use_local_synchronization=True ("MPI backend doesn't support
use_local_synchronization=True"), before anything is made, on every build. The train file
asks for exactly that and falls back to "no dp group" on ValueError (the step then skips the
all-reduce but still divides by the dp size). In the capture "mpi" passes _builtin_backend, is
dropped, the group is made on the fake backend and taken as dp: the step all-reduces. In the
real run every rank takes the fallback: each keeps half its own gradient.

Truth (torch4_truth.py FILE 1, gloo): w1 0.0067, w2 0.010 after step 1 (wrong).
Verdict at a88d2d1: EQUIVALENT (4 goals, 27 s): false accept R36a-4.
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
    try:
        _G["dp_gloo"] = dist.new_group(ranks=ranks, backend="mpi", use_local_synchronization=True)
    except ValueError:
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
            p.grad.div_(dist.get_world_size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
