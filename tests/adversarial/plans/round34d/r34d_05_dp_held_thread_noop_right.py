"""Round 34d (dp 2, right): control of r34d_01 / r34d_03 / r34d_04: the same held
`_thread.start_new_thread` thread, which only reads the gradients (`p.grad.numel()`).
Truth (tests/adversarial/torch4_truth.py FILE 2): w1 0.0, w2 2.8e-17.
prove --torch at 0795de7: EQUIVALENT (4 goals, 60 s). (A fix refusing every thread would
refuse it: acceptable.)"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
import _thread
import time

_START = _thread.start_new_thread
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
                p.grad.numel()                  # right: nothing changes
        c0 = _COUNT()
        _START(again, ())
        time.sleep(0.05)
        while _COUNT() > c0:
            time.sleep(0.001)
        time.sleep(0.01)
    optimizer.step()
    optimizer.zero_grad()
    return loss
