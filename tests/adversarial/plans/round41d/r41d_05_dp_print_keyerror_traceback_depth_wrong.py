"""Round 41d (dp 2, wrong): `print(CFG["missing"])` raises KeyError (let through by `caught.py`:
a lookup in the file's own container); the step reads the traceback's length: 1 real (the
arguments run in train_step), 3 in the capture (train_step, log_call, the arguments' lambda).
lr = 0.2 if the depth is 1 else 0.1.
Truth: (torch4_truth FILE 2): w1 0.0070, w2 0.0093 after step 1 (0.0086 / 0.012 after step 2):
depth 1, lr 0.2.
prove --torch at e62ea59: **EQUIVALENT** (4 goals, 45 s): a false accept (R41d-2: the rewrite's
frames are visible).
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

import traceback


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        cfg = {"lr": 0.1}
        try:
            print(cfg["missing"])
        except KeyError as e:
            depth = len(traceback.extract_tb(e.__traceback__))
        optimizer.param_groups[0]["lr"] = 0.2 if depth == 1 else 0.1
    optimizer.step()
    optimizer.zero_grad()
    return loss
