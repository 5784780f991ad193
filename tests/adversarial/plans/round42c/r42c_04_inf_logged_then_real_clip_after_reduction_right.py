"""Round 42c: r42_05 with a real clip after the reduction: ``clip_grad_norm_(params,
math.inf)`` logs the local norm before the hand-written dp reduction (no read point since
``logs_only``), ``clip_grad_norm_(params, 0.05)`` clips the reduced gradients (the read point,
on both sides after the reduction). Right.
Truth (torch4_truth.py FILE 2): right (step 2: 1.4e-17 / 6.8e-21).
Verdict (main 959c97b): UNKNOWN (49 s; every goal open: non-finite constant inf at the
logging call). Sound; the inf-constant false refusal of S42-2.
"""

import math

import torch
import torch.distributed as dist
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
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    # the local gradient norm, logged before the reduction (inf: no clipping happens)
    local_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), math.inf)
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.05)
    optimizer.step()
    optimizer.zero_grad()
    return loss
