"""Round 35a (dp 2, right): control of r35a_01. The same held-starter thread makes a tensor of its
own and hands `.item()` back, with no collective (n = 1 in the capture and in the real run);
lr = 0.1 * n is the spec's.
Truth (tests/adversarial/torch4_truth.py FILE 2): w1 0.0, w2 2.8e-17 (both steps).
prove --torch at ff7d7f1: EQUIVALENT (4 goals, 15 s): right.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
import _thread
import time

_START = _thread.start_new_thread       # taken at import, before the guard wraps it
_COUNT = _thread._count

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


def _scalar(mesh):
    out = []

    def work(*_):
        t = torch.ones(1)                     # the thread's own tensor: real, not fake
        t = t * 1.0                           # right: no collective, n = 1 everywhere
        out.append(t.item())
    c0 = _COUNT()
    _START(work, ())
    time.sleep(0.05)
    while _COUNT() > c0:
        time.sleep(0.001)
    return out[0] if out else 1.0


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        optimizer.param_groups[0]["lr"] = 0.1 * _scalar(mesh)
    optimizer.step()
    optimizer.zero_grad()
    return loss
