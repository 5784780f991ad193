"""Round 41d (dp 2, wrong): `sys.stdout.write` replaced by an instance attribute (a
`TextIOWrapper` has a `__dict__`; print looks `write` up on the object): the stream is still the
same object on the same fd and file, so `_outside` holds and the capture skips the print; the
real print calls the file's `write` twice ("step done", "\\n"). lr = 0.1 * (1 + count).
Truth: (torch4_truth FILE 2): w1 0.014, w2 0.019 after step 1 (0.017 / 0.023 after step 2): two
writes, lr 0.3.
prove --torch at e62ea59: **EQUIVALENT** (4 goals, 82 s): a false accept (R41d-3: the real print
runs code the skip does not).
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


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        calls = []
        out = sys.stdout
        real_write = out.write

        def write(s):
            calls.append(s)
            return real_write(s)

        out.write = write                    # an instance attribute: print looks `write` up
        try:
            print("step done")
        finally:
            del out.write
        optimizer.param_groups[0]["lr"] = 0.1 * (1 + len(calls))
    optimizer.step()
    optimizer.zero_grad()
    return loss
