"""Round 41d (dp 2, wrong): a user object's `__str__` (run by the skip as by the real print)
reads its caller's frame: the real print is C code, so `sys._getframe(1)` is `train_step`; the
capture's `str()` is called from `log_calls._skipped`. lr = 0.2 if the caller is train_step.
Truth: (torch4_truth FILE 2): w1 0.0070, w2 0.0093 after step 1 (0.0086 / 0.012 after step 2): the
caller is train_step, lr 0.2.
prove --torch at e62ea59: **EQUIVALENT** (4 goals, 75 s): a false accept (R41d-2: the skip's str()
runs from another frame).
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn

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
    return model

import sys


class Tag:
    def __str__(self):
        self.caller = sys._getframe(1).f_code.co_name
        return "tag"


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        tag = Tag()
        print(tag)
        optimizer.param_groups[0]["lr"] = 0.2 if tag.caller == "train_step" else 0.1
    optimizer.step()
    optimizer.zero_grad()
    return loss
