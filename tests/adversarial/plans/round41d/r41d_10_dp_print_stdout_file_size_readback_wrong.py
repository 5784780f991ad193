"""Round 41d (dp 2, wrong when stdout is a regular file, `python train.py > log.txt`): the step
reads the size of its own standard output (`os.fstat(1)`) before and after `print("step done",
flush=True)`: real, the file grew (lr 0.2); the capture skips the print (lr 0.1 when the
capture's stdout is a file; a pipe's size is 0 either way). The contract's "a stream outside
the process" is read back through the file system.
Truth: (torch4_truth FILE 2 > file): w1 0.0070, w2 0.0093 after step 1 (0.0086 / 0.012 after step
2) with the truth's stdout a file; with stdout a pipe (| grep): right (5.6e-17 / 0).
prove --torch at e62ea59: **EQUIVALENT** (4 goals, 87 s): a false accept when the run's stdout is
a file (R41d-5: the "outside the process" stream is read back).
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
import os


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        sys.stdout.flush()
        before = os.fstat(sys.stdout.fileno()).st_size     # a regular file: its size
        print("step done", flush=True)
        grew = os.fstat(sys.stdout.fileno()).st_size > before
        optimizer.param_groups[0]["lr"] = 0.2 if grew else 0.1
    optimizer.step()
    optimizer.zero_grad()
    return loss
