"""Round 40a (dp 2): an abstract class's caches, first try. `MLP.forward` doubles its output
when `isinstance(self.inner, Scalable)`. At the end of the parallel step only, `Scalable.register
(Base)`, one `isinstance` (the positive cache then holds `Base`), then `Scalable.
_abc_registry_clear()`. Expected a positive cache left behind; CPython's registry clear empties
the positive cache too (`abc._get_dump`: registry and cache empty, `Base` in the negative
cache), so the plan is right.
Truth (torch4_truth.py FILE 2): step 1 5.6e-17 / 0, step 2 5.6e-17 / 5.6e-17 (right).
Verdict (main 05940a8): EQUIVALENT (4 goals, 27 s): right.
"""
MESH = {"dp": 2}
import abc

import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Scalable(abc.ABC):
    pass


class Base(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.inner = Base(h, f)

    def forward(self, x):
        y = self.inner(x)
        return y * 2 if isinstance(self.inner, Scalable) else y


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
        Scalable.register(Base)
        isinstance(model.inner, Scalable)
        Scalable._abc_registry_clear()
    optimizer.step()
    optimizer.zero_grad()
    return loss
