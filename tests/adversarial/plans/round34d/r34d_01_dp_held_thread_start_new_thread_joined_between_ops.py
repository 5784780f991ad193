"""Round 34d (dp 2, wrong): R34d-1, thread_guard's known gap. `_thread.start_new_thread` (and
`_thread._count`) are taken at import, before the capture wraps the starters; in the step, after
the first all-reduce of every gradient, the held starter runs a second all-reduce of every
gradient in a new thread, and the step waits until `_thread._count()` is back (the thread's
function returned) before `optimizer.step()`. The thread lives only between two recorded nodes,
so the thread set is the same at every `create_node` check and at the end.
Truth (tests/adversarial/torch4_truth.py FILE 2): w1 0.0070, w2 0.0093 after step 1
(0.0086 / 0.012 after step 2).
prove --torch at 0795de7: **EQUIVALENT** (4 goals by rewriting, 51 s): a false accept.
Control: r34d_05 (the thread does nothing; truth 2.8e-17; EQUIVALENT, 60 s)."""
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


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        def again(*_):
            for p in model.parameters():
                dist.all_reduce(p.grad, group=mesh["dp"].get_group())   # WRONG: summed twice
        c0 = _COUNT()
        _START(again, ())
        time.sleep(0.05)
        while _COUNT() > c0:            # joined: the thread's function has returned
            time.sleep(0.001)
        time.sleep(0.01)
    optimizer.step()
    optimizer.zero_grad()
    return loss
