"""Round 34d (dp 2, wrong): a worker thread started at import (alive before the capture),
waiting on a queue; the step hands it the second all-reduce of every gradient and waits for it.
The number of threads does not change during the step, but the guard compares the threads
alive at the capture's start with those before the train file was imported.
Truth (tests/adversarial/torch4_truth.py FILE 2): w1 0.0070, w2 0.0093 after step 1
(0.0086 / 0.012 after step 2).
prove --torch at 0795de7: exit 3, "line 1: threads started when the train file was imported
run (1 more than before it)" (14 s): sound."""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
import threading
import queue

_Q = queue.Queue()
_DONE = queue.Queue()


def _worker():
    while True:
        fn = _Q.get()
        fn()
        _DONE.put(None)


threading.Thread(target=_worker, daemon=True).start()   # alive before the capture

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
        _Q.put(again)
        _DONE.get()
    optimizer.step()
    optimizer.zero_grad()
    return loss
