"""Round 38c (dp 2, right): the usual unwrap of a wrapped model (HF Trainer / accelerate style):
`try: inner = model.module` / `except AttributeError: inner = model`, which raises identically
in the real run and the capture (a plain nn.Module has no `.module`); plain dp all-reduce.
Truth (torch4_truth.py FILE 1): w1 6e-17, w2 0 (right).
Verdict (wip/r38 18debf8): exit 3 (29 s), "the train file catches AttributeError ('MLP' object
has no attribute 'module')": false refusal R38c-5 (the same AttributeError in both runs).
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


def _n(g):
    return 1.0


def _unwrap(model):
    # the same AttributeError in both runs
    try:
        return model.module
    except AttributeError:
        return model


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((_unwrap(model)(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        optimizer.param_groups[0]["lr"] = 0.1 * _n(model.w1.weight.grad)
    optimizer.step()
    optimizer.zero_grad()
    return loss
