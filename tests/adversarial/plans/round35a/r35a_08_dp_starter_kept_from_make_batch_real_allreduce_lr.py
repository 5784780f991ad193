"""Round 35a (dp 2, wrong): R35a-1 with no reference taken at import: `make_batch` runs with the
original thread starters (R34d-3's fix, `threads_let`) and keeps `_thread.start_new_thread` in a
global; the step uses it as r35a_01 does (a thread all-reduces a real tensor of its own over dp;
`.item()` sets lr = 0.1 * n: 2 in the real run, 1 on the capture's FakeProcessGroup).
Truth (tests/adversarial/torch4_truth.py FILE 2): w1 0.0070, w2 0.0093 after step 1 (0.0086 / 0.0118 after step 2).
prove --torch at ff7d7f1: **EQUIVALENT** (4 goals by rewriting, 46 s): a false accept (R35a-1,
no reference kept from import). Control: r35a_02.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
import _thread
import time

_START = None
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
    global _START
    _START = _thread.start_new_thread   # the original here (threads_let)
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
        dist.all_reduce(t, group=mesh["dp"].get_group())   # WRONG: real 2, fake 1
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
