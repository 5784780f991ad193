"""Round 38c (dp 2, right): a realistic `try` / `except ValueError` that raises identically in the
real run and the capture: the step reads an optional gradient scale from the environment
(`float(os.environ.get("SHARDPROOF_R38C_SCALE", ""))`, unset: ValueError, fallback 1.0), as
training scripts do for knobs. Plain dp: all-reduce of the gradients.
Truth (torch4_truth.py FILE 1): w1 6e-17, w2 0 (right).
Verdict (wip/r38 18debf8): exit 3 (21 s), "the train file catches ValueError (could not convert
string to float: '') at line 47": false refusal R38c-5 (the same ValueError in both runs).
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
import os

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


def _n(g):
    # an optional knob: unset in both runs, the same ValueError in both
    try:
        return float(os.environ.get("SHARDPROOF_R38C_SCALE", ""))
    except ValueError:
        return 1.0


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        optimizer.param_groups[0]["lr"] = 0.1 * _n(model.w1.weight.grad)
    optimizer.step()
    optimizer.zero_grad()
    return loss
