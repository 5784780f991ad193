"""Round 34d (dp 2, wrong): `threading.Thread.start` taken at import and called on a Thread in
the step (the second all-reduce of every gradient). The held `Thread.start` looks up
`threading._start_new_thread` as a module global at call time, which the guard has wrapped.
Truth (tests/adversarial/torch4_truth.py FILE 2): w1 0.0070, w2 0.0093 after step 1
(0.0086 / 0.012 after step 2).
prove --torch at 0795de7: exit 3, refused at the `_START(t)` line (58; 52 when run, before
this docstring) "(threading._start_new_thread)" (13 s):
sound."""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
import threading

_START = threading.Thread.start          # taken at import

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
        t = threading.Thread(target=again)
        _START(t)
        t.join()
    optimizer.step()
    optimizer.zero_grad()
    return loss
