"""Round 38e (dp 2, right): a lambda as a class attribute used as a method, calling zero-argument
`super()`: `forward = lambda self, x: super().forward(x) * 0.5`. Python reads `super()`'s
second argument from the first argument of the running frame; `caught` moves the body into an
inner `lambda:` with no arguments, so in the capture `super()` raises "RuntimeError: super():
no arguments" (the real run is fine). A plain data-parallel plan with all-reduced gradients.
Truth (torch4_truth.py FILE 1): w1 0, w2 0 (right).
Verdict (main 195d560): exit 3 (7 s) "line 28: capturing the training step failed:
RuntimeError: super(): no arguments": false refusal R38e-3.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Base(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


class MLP(Base):
    forward = lambda self, x: super().forward(x) * 0.5   # noqa: E731


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
    optimizer.step()
    optimizer.zero_grad()
    return loss
