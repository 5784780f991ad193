"""Round 42c: ``clip_grad_norm_(params, -math.inf)`` before the hand-written dp reduction.
``logs_only`` counts -inf as torch's log-the-norm idiom, but the coefficient
``clamp(-inf / (norm + 1e-6), max=1)`` is -inf: the gradients become -inf / inf / nan (checked
in eager torch), so a clip that acts is no read point.
Truth (torch4_truth.py FILE 2): NaN on both sides (w1, w2 distance NaN; the clip destroys
the gradients on every rank and in the spec). Verdict (main 959c97b): UNKNOWN (81 s; every
goal open: non-finite constant -inf). Sound; R42c-2 (logs_only is wrong about -inf, no verdict
effect seen).
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
    # the local gradient norm, logged before the reduction (-inf: it does clip)
    local_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), -math.inf)
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
