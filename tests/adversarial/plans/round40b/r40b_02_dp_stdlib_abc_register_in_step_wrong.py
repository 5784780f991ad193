"""Idea: R39a-6 reads the registry of an abstract class the encoder reaches (the model's class
chain, a `super()` cell). A *standard library* ABC is reached by nothing of the train file's
state: the parallel step registers the model's config class with `numbers.Number` at its end
(`numbers.Number.register(Cfg)`), and `forward` scales by 0.5 when
`isinstance(self.cfg, numbers.Number)`: from step 2 on the ranks scale, the spec does not.
Truth (torch4_truth.py FILE 2): step 1 5.6e-17 / 0, step 2 w1 0.0027 / w2 0.0051.
Verdict at 1510d44: EQUIVALENT (4 goals, 34 s): false accept R40b-2 (the registry of an ABC
the train file's state does not reach is read by nothing).
"""
MESH = {"dp": 2}
import numbers

import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Cfg:
    def __init__(self):
        self.width = 1


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)
        self.cfg = Cfg()

    def forward(self, x):
        y = self.w2(nn.functional.silu(self.w1(x)))
        return y * 0.5 if isinstance(self.cfg, numbers.Number) else y


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
        numbers.Number.register(Cfg)
    optimizer.step()
    optimizer.zero_grad()
    return loss
